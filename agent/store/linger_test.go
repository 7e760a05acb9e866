package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriterLingersWhileWritesKeepComing: writers in a closed loop (each
// submits its next write once the last is durable, like the agent's
// workers) share commits: while writes keep coming the writer waits a
// little for the rest of a burst instead of committing its first write
// alone. Without the linger a commit took 3-4 of the 32 writers' writes,
// with it about 20.
func TestWriterLingersWhileWritesKeepComing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	ctx := context.Background()
	const writers, rounds = 32, 30
	st0 := s.Stats()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := s.Do(ctx, func(tx *Tx) error { return tx.SetMeta("k", "v") }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	commits, writes := st.Commits-st0.Commits, st.Writes-st0.Writes
	t.Logf("%d writes in %d commits", writes, commits)
	if writes != writers*rounds {
		t.Fatalf("%d writes committed, want %d", writes, writers*rounds)
	}
	// The bound sits between the two (6 of 32); a bound of 8 failed in
	// some runs on a loaded machine (load 3.5), with the linger in place.
	if per := float64(writes) / float64(commits); per < 6 {
		t.Fatalf("%.1f writes per commit, want ≥ 6 of the %d writers", per, writers)
	}
}
