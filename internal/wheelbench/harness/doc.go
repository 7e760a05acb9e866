// Package harness measures pkg/wheel against time.AfterFunc and
// one-goroutine-per-task + time.Sleep: bytes per pending task, insert cost,
// firing lateness and idle CPU. Each measurement runs in a fresh child
// process (a re-execution of the current binary) so that heap deltas start
// from a clean heap and sleeping goroutines die with their process. It is
// shared by the wheelbench program and pkg/wheel's benchmarks.
package harness
