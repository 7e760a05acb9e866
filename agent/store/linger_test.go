package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
)

// TestWriterLingersWhileWritesKeepComing: once writes keep coming (the last
// batch had two write functions and the next comes within the time it
// took), the writer does not commit the first write of a burst alone: it
// waits (at most Options.Linger, on its clock) until the batch is full,
// and the whole burst shares one commit. The clock is fake and never moves
// during the burst, so the linger can only end by the batch filling up:
// without it the first write commits on its own before the others are
// even submitted.
func TestWriterLingersWhileWritesKeepComing(t *testing.T) {
	const burst = 8
	clk := clock.NewFake(time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
	s := openWith(t, filepath.Join(t.TempDir(), "agent.db"), Options{MaxBatch: burst, Clock: clk})
	ctx := testutil.Context(t, 30*time.Second)
	write := func(tx *Tx) error { return tx.SetMeta("k", "v") }
	// held returns a write function that blocks the writer until release
	// is closed, after telling entered.
	held := func(entered chan<- struct{}, release <-chan struct{}) func(*Tx) error {
		return func(tx *Tx) error {
			close(entered)
			<-release
			return write(tx)
		}
	}
	do := func(fn func(*Tx) error) <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- s.Do(ctx, fn) }()
		return ch
	}
	wait := func(chs ...<-chan error) {
		t.Helper()
		for _, ch := range chs {
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
	}

	// A batch of one (h1), then a batch of two (h2 and x) that takes one
	// second of the writer's clock: writes are coming from several callers.
	in1, out1 := make(chan struct{}), make(chan struct{})
	d1 := do(held(in1, out1))
	<-in1
	in2, out2 := make(chan struct{}), make(chan struct{})
	d2, dx := do(held(in2, out2)), do(write)
	testutil.Eventually(t, 10*time.Second, "h2 and x queued behind h1", func() bool { return len(s.reqs) == 2 })
	close(out1)
	<-in2
	clk.Advance(time.Second)
	close(out2)
	wait(d1, d2, dx)

	// The burst: its first write arrives alone and must wait for the rest.
	before := s.Stats()
	first := do(write)
	testutil.Eventually(t, 10*time.Second, "the writer lingering on its first write", func() bool { return clk.Timers() > 0 })
	select {
	case err := <-first:
		t.Fatalf("the burst's first write was committed alone (%v)", err)
	default:
	}
	rest := make([]<-chan error, 0, burst-1)
	for range burst - 1 {
		rest = append(rest, do(write))
	}
	wait(append(rest, first)...)
	after := s.Stats()
	if commits, writes := after.Commits-before.Commits, after.Writes-before.Writes; commits != 1 || writes != burst {
		t.Fatalf("the burst took %d commits for %d writes, want 1 for %d", commits, writes, burst)
	}
}
