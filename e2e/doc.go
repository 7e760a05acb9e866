// Package e2e holds the end-to-end tests and benchmarks of ax: a real
// controller (embedded NATS with JetStream, file store in a temporary
// directory) and real agents (SQLite in temporary directories), talking
// only over NATS as in production. Where a test kills something with
// SIGKILL (a group job's holder, a controller replica), that agent or
// controller runs as a child process: the test binary run again in a
// helper mode (agentproc_test.go, ctlproc_test.go). Replica and cluster
// tests use external servers from internal/natstest (one server, or a
// three-node JetStream cluster).
//
// The package has no non-test code. Run it with
//
//	go test -race -count=1 ./e2e
//	go test -run '^$' -bench BenchmarkEndToEnd -benchtime 20000x ./e2e
//	go test -run '^$' -bench BenchmarkGroupFailover -benchtime 20x ./e2e
//
// Set AX_TEST_LOG=1 to see the controller's and agents' logs.
package e2e
