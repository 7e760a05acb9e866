package histindex

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestLatestOnly: of several snapshots of one execution in a batch only
// the newest is written (by updated_at, the later one on a tie, an older
// one later in the stream loses), job retirements and other executions
// are kept in order.
func TestLatestOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ex := func(id string, state protocol.State, at time.Duration) Item {
		return Item{Exec: &protocol.Execution{ExecID: id, State: state, UpdatedAt: t0.Add(at)}}
	}
	job := Item{Job: &protocol.JobRetired{Job: protocol.Job{ID: "j"}}}
	batch := []Item{
		ex("a", protocol.StateTriggered, 1), ex("b", protocol.StateTriggered, 1), job,
		ex("a", protocol.StateRunning, 2), ex("a", protocol.StateSuccess, 3),
		ex("b", protocol.StateRunning, 2), ex("b", protocol.StateTriggered, 1), // b: an older event re-published late
		ex("c", protocol.StatePending, 5), ex("c", protocol.StateCancelled, 5), // c: a tie, the later one wins
	}
	got := LatestOnly(batch)
	want := []string{"job", "a SUCCESS", "b RUNNING", "c CANCELLED"}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(got), len(want), got)
	}
	for i, it := range got {
		s := "job"
		if it.Exec != nil {
			s = it.Exec.ExecID + " " + string(it.Exec.State)
		}
		if s != want[i] {
			t.Errorf("item %d: %s, want %s", i, s, want[i])
		}
	}
	one := []Item{ex("x", protocol.StateSuccess, 1)}
	if got := LatestOnly(one); len(got) != 1 {
		t.Fatalf("single item: %+v", got)
	}
}

// TestSameInstantStepsOutOfOrder: the steps one report applied at once
// share their updated_at; their events reaching AX_EVT out of order (the
// SUCCESS event first, a replayed RUNNING one after it), in one batch or
// in two, leave the index at SUCCESS. Another attempt, or a later
// updated_at, still replaces it.
func TestSameInstantStepsOutOfOrder(t *testing.T) {
	ctx := context.Background()
	idx := openTestIndex(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(id string, attempt int, s protocol.State, updated time.Time) Item {
		return Item{Exec: &protocol.Execution{ExecID: id, JobID: "ax-n-20260101000000-abcdef", Attempt: attempt, State: s, UpdatedAt: updated}}
	}
	state := func(id string) protocol.State {
		e, ok, err := idx.Get(ctx, id)
		if err != nil || !ok {
			t.Fatalf("get %s: %v %v", id, ok, err)
		}
		return e.State
	}
	a, b := "ax-n-20260101000000-abcdef-1", "ax-n-20260101000000-abcdef-2"
	// One batch: SUCCESS, then TRIGGERED and RUNNING of the same instant.
	if err := idx.Apply(ctx, LatestOnly([]Item{snap(a, 1, protocol.StateSuccess, at), snap(a, 1, protocol.StateTriggered, at),
		snap(a, 1, protocol.StateRunning, at)}), 3); err != nil {
		t.Fatal(err)
	}
	// Two batches.
	for i, it := range []Item{snap(b, 1, protocol.StateSuccess, at), snap(b, 1, protocol.StateRunning, at)} {
		if err := idx.Apply(ctx, []Item{it}, uint64(4+i)); err != nil {
			t.Fatal(err)
		}
	}
	if sa, sb := state(a), state(b); sa != protocol.StateSuccess || sb != protocol.StateSuccess {
		t.Fatalf("after same-instant steps out of order: %s, %s; want SUCCESS, SUCCESS", sa, sb)
	}
	if err := idx.Apply(ctx, []Item{snap(b, 2, protocol.StatePending, at)}, 6); err != nil {
		t.Fatal(err)
	}
	if err := idx.Apply(ctx, []Item{snap(a, 1, protocol.StateCancelled, at.Add(time.Millisecond))}, 7); err != nil {
		t.Fatal(err)
	}
	if sa, sb := state(a), state(b); sa != protocol.StateCancelled || sb != protocol.StatePending {
		t.Fatalf("after a later change and a new attempt: %s, %s; want CANCELLED, PENDING", sa, sb)
	}
}
