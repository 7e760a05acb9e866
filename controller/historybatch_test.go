package controller

import (
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
	ex := func(id string, state protocol.State, at time.Duration) histItem {
		return histItem{exec: &protocol.Execution{ExecID: id, State: state, UpdatedAt: t0.Add(at)}}
	}
	job := histItem{job: &protocol.JobRetired{Job: protocol.Job{ID: "j"}}}
	batch := []histItem{
		ex("a", protocol.StateTriggered, 1), ex("b", protocol.StateTriggered, 1), job,
		ex("a", protocol.StateRunning, 2), ex("a", protocol.StateSuccess, 3),
		ex("b", protocol.StateRunning, 2), ex("b", protocol.StateTriggered, 1), // b: an older event re-published late
		ex("c", protocol.StatePending, 5), ex("c", protocol.StateCancelled, 5), // c: a tie, the later one wins
	}
	got := latestOnly(batch)
	want := []string{"job", "a SUCCESS", "b RUNNING", "c CANCELLED"}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(got), len(want), got)
	}
	for i, it := range got {
		s := "job"
		if it.exec != nil {
			s = it.exec.ExecID + " " + string(it.exec.State)
		}
		if s != want[i] {
			t.Errorf("item %d: %s, want %s", i, s, want[i])
		}
	}
	one := []histItem{ex("x", protocol.StateSuccess, 1)}
	if got := latestOnly(one); len(got) != 1 {
		t.Fatalf("single item: %+v", got)
	}
}
