package testutil

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"
)

// LogEnv is the environment variable that turns on test logging: when it is
// set to anything non-empty, Logger writes debug text logs to stderr.
const LogEnv = "AX_TEST_LOG"

// PollInterval is how often Eventually and EventuallyFunc check their
// condition.
const PollInterval = 10 * time.Millisecond

// Logger returns a debug-level text logger on stderr when AX_TEST_LOG is
// set, and a logger that discards everything otherwise.
func Logger() *slog.Logger {
	if os.Getenv(LogEnv) == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Context returns a context that times out after d and is cancelled when
// the test (and its cleanups registered earlier) ends. It is derived from
// context.Background, not tb.Context, so cleanups registered after it may
// still use it.
func Context(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every PollInterval until it returns true, and fails
// the test with "timed out after <timeout> waiting for <what>" if it does
// not within timeout. cond is called at least once.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	EventuallyFunc(tb, timeout, func() string { return what }, cond)
}

// EventuallyFunc is Eventually with a description that is built only when
// the wait times out, so it can report the state last seen.
func EventuallyFunc(tb testing.TB, timeout time.Duration, what func() string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what())
			return // tb.Fatalf stops the goroutine; this guards a TB that does not.
		}
		<-tick.C
	}
}

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the caller binds it; tests that restart a
// server on the same port use it to pick one up front.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Filter returns, in a new slice, the elements of s that keep holds, in
// their order (nil when none does): the events or reports of one
// execution out of all a test recorded.
func Filter[T any](s []T, keep func(T) bool) []T {
	var out []T
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
