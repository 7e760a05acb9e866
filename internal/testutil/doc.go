// Package testutil holds the small helpers that ax's test packages share:
// a logger that is silent unless AX_TEST_LOG is set, a context with a
// timeout that is cancelled when the test ends, a poll-until-true wait with
// a deadline (tests never sleep fixed times), a free loopback TCP port,
// a process's resident memory as /proc tells it (ProcRSS), and the pages
// it touched in a window (ClearRefs, then ProcReferenced).
//
// It is a test-support package like internal/natstest: it imports testing
// and is meant to be used only from _test.go files.
package testutil
