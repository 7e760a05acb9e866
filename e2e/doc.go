// Package e2e holds the end-to-end tests and benchmarks of ax: a real
// controller (embedded NATS with JetStream, file store in a temporary
// directory) and real agents (SQLite in temporary directories) in one
// process, talking only over NATS as in production.
//
// The package has no non-test code. Run it with
//
//	go test -race -count=1 ./e2e
//	go test -run '^$' -bench BenchmarkEndToEnd -benchtime 20000x ./e2e
//
// Set AX_TEST_LOG=1 to see the controller's and agents' logs.
package e2e
