package histindex

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestApplyChunksKeepEachBody: one Apply over several statements' worth
// of snapshots (applyChunk), mixing snapshots older than the stored ones,
// newer ones and new executions, stores each execution's own newest body:
// the rows a statement wrote are matched to their bodies by exec id, and a
// stale snapshot within a chunk changes neither its row nor its body.
func TestApplyChunksKeepEachBody(t *testing.T) {
	ctx := context.Background()
	idx := openTestIndex(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := protocol.NewJobID("chunk", t0, 7)
	exec := func(i int, state protocol.State, updated time.Time) *protocol.Execution {
		at := t0.Add(time.Duration(i) * time.Second)
		return &protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: state,
			Agent: "edge-1", ScheduledAt: at, UpdatedAt: updated, Reason: fmt.Sprintf("%s of %d", state, i)}
	}
	const stored, added = 3 * applyChunk, applyChunk + 5
	var first []Item
	for i := range stored {
		first = append(first, Item{Exec: exec(i, protocol.StateRunning, t0.Add(time.Hour))})
	}
	if err := idx.Apply(ctx, first, 1); err != nil {
		t.Fatal(err)
	}
	var second []Item
	for i := range stored + added {
		switch {
		case i >= stored: // new
			second = append(second, Item{Exec: exec(i, protocol.StateSuccess, t0.Add(2*time.Hour))})
		case i%3 == 0: // older than the stored snapshot: no change
			second = append(second, Item{Exec: exec(i, protocol.StateTriggered, t0.Add(time.Minute))})
		default: // newer
			second = append(second, Item{Exec: exec(i, protocol.StateFailed, t0.Add(2*time.Hour))})
		}
	}
	if err := idx.Apply(ctx, second, 2); err != nil {
		t.Fatal(err)
	}
	for i := range stored + added {
		want := protocol.StateFailed
		switch {
		case i >= stored:
			want = protocol.StateSuccess
		case i%3 == 0:
			want = protocol.StateRunning
		}
		id := exec(i, want, t0).ExecID
		got, ok, err := idx.Get(ctx, id)
		if err != nil || !ok {
			t.Fatalf("execution %d: ok=%v err=%v", i, ok, err)
		}
		if wantReason := fmt.Sprintf("%s of %d", want, i); got.ExecID != id || got.State != want || got.Reason != wantReason {
			t.Errorf("execution %d: body %s %s %q, want %s %s %q", i, got.ExecID, got.State, got.Reason, id, want, wantReason)
		}
	}
	if seq, err := idx.Cursor(ctx); err != nil || seq != 2 {
		t.Fatalf("cursor %d (%v), want 2", seq, err)
	}
}

// openTestIndex opens an index of 16 shards in a file of the test's temp
// dir, closed when the test ends.
func openTestIndex(t *testing.T) *Index {
	t.Helper()
	idx, err := Open(context.Background(), filepath.Join(t.TempDir(), "history.db"), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idx.Close() })
	return idx
}
