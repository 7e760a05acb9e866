// Command wheelbench compares pkg/wheel with time.AfterFunc and
// one-goroutine-per-task + time.Sleep, in one run, and prints a table of
// bytes per pending task, ns per insert, lateness and idle CPU against the
// budgets of docs/architecture.md (Budgets). Every measurement runs in its own child process.
//
//	go run ./internal/wheelbench -n 100000,500000,1000000 -lateness-n 100000 -idle 5s
package main
