package histindex

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

func snap(id string, st protocol.State, at time.Time, seq uint64) Item {
	return Item{Exec: &protocol.Execution{ExecID: id, JobID: "j", Attempt: 1, State: st, UpdatedAt: at}, Seq: seq}
}

func ids(items []Item) []string {
	var out []string
	for _, it := range items {
		if it.Exec != nil {
			out = append(out, it.Exec.ExecID+":"+string(it.Exec.State))
		} else {
			out = append(out, "job:"+it.Job.Job.ID)
		}
	}
	return out
}

func sameIDs(t *testing.T, what string, got []Item, want ...string) {
	t.Helper()
	g := ids(got)
	if len(g) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, g, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, g, want)
		}
	}
}

func TestHoldbackSplit(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	now := t0
	quiet := t0.Add(15 * time.Second) // the wall clock's quiet horizon
	later := func(it Item, sched time.Time) Item { it.Exec.ScheduledAt = sched; return it }
	retry := func(it Item, next time.Time) Item { it.Exec.NextAttemptAt = next; return it }
	tests := []struct {
		name   string
		batch  []Item
		write  []string // what Split returns
		held   int
		cursor uint64 // Cursor(last seq of the batch)
	}{
		{"a pending snapshot is held", []Item{snap("a", protocol.StatePending, t0, 1)}, nil, 1, 0},
		{"its finished one is written and drops it", []Item{snap("a", protocol.StateSuccess, t0.Add(time.Second), 2)}, []string{"a:SUCCESS"}, 0, 2},
		{"job retirements are written", []Item{{Job: &protocol.JobRetired{Job: protocol.Job{ID: "j1"}}, Seq: 3}}, []string{"job:j1"}, 0, 3},
		{"a newer live step replaces the held one", []Item{snap("b", protocol.StatePending, t0, 4), snap("b", protocol.StateRunning, t0.Add(time.Second), 5)}, nil, 1, 4},
		{"an older step read after a newer one is dropped", []Item{snap("b", protocol.StateTriggered, t0, 6)}, nil, 1, 4},
		{"another execution: the cursor stays before b's step", []Item{snap("c", protocol.StatePending, t0, 7)}, nil, 2, 4},
		{"b finishes: the cursor stops before c", []Item{snap("b", protocol.StateFailed, t0.Add(2*time.Second), 8)}, []string{"b:FAILED"}, 1, 6},
		{"a pending snapshot scheduled after the horizon is written", []Item{later(snap("d", protocol.StatePending, t0, 9), t0.Add(30*time.Minute))}, []string{"d:PENDING"}, 1, 6},
		{"one scheduled before it is held", []Item{later(snap("e", protocol.StatePending, t0, 10), t0.Add(10*time.Second))}, nil, 2, 6},
		{"a retry due after it is written and drops c's held step", []Item{retry(snap("c", protocol.StateRetryWaiting, t0.Add(3*time.Second), 11), t0.Add(time.Minute))}, []string{"c:RETRY_WAITING"}, 1, 9},
		{"a retry due before it is held", []Item{retry(snap("f", protocol.StateRetryWaiting, t0, 12), t0.Add(time.Second))}, nil, 2, 9},
		{"f's next attempt is held", []Item{snap("f", protocol.StatePending, t0.Add(2*time.Second), 13)}, nil, 2, 9},
		{"an older quiet step of f read after it is dropped", []Item{retry(snap("f", protocol.StateRetryWaiting, t0.Add(time.Second), 14), t0.Add(time.Hour))}, nil, 2, 9},
	}
	h := NewHoldback()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := tt.batch[len(tt.batch)-1].Seq
			got := h.Split(tt.batch, now, quiet)
			sameIDs(t, "Split", got, tt.write...)
			if h.Len() != tt.held {
				t.Errorf("held %d, want %d", h.Len(), tt.held)
			}
			if c := h.Cursor(last); c != tt.cursor {
				t.Errorf("Cursor(%d) = %d, want %d", last, c, tt.cursor)
			}
		})
	}
}

func TestHoldbackDue(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	h := NewHoldback()
	h.Split([]Item{snap("a", protocol.StatePending, t0, 1), snap("b", protocol.StatePending, t0, 2)}, t0, t0)
	h.Split([]Item{snap("c", protocol.StatePending, t0, 3)}, t0.Add(3*time.Second), t0)
	h.Split([]Item{snap("a", protocol.StateRunning, t0.Add(time.Second), 4)}, t0.Add(4*time.Second), t0)

	// Held since before t0+1s: b only (a was replaced at t0+4s).
	sameIDs(t, "Due by age", h.Due(nil, t0.Add(time.Second), 100), "b:PENDING")
	if c := h.Cursor(4); c != 2 {
		t.Errorf("Cursor after b written = %d, want 2 (c at 3 held)", c)
	}
	// At most one held: the oldest goes.
	sameIDs(t, "Due by count", h.Due(nil, t0, 1), "c:PENDING")
	if c := h.Cursor(4); c != 3 {
		t.Errorf("Cursor = %d, want 3 (a's running step at 4 held)", c)
	}
	sameIDs(t, "All", h.All(nil), "a:RUNNING")
	if h.Len() != 0 {
		t.Fatalf("held %d after All", h.Len())
	}
	if c := h.Cursor(9); c != 9 {
		t.Errorf("Cursor with nothing held = %d, want 9", c)
	}
}

func TestHoldbackCompacts(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	h := NewHoldback()
	for i := range 5000 {
		id := "e" + string(rune('a'+i%26)) + time.Duration(i).String()
		h.Split([]Item{snap(id, protocol.StatePending, t0, uint64(2*i+1))}, t0, t0)
		h.Split([]Item{snap(id, protocol.StateSuccess, t0, uint64(2*i+2))}, t0, t0)
	}
	if h.Len() != 0 {
		t.Fatalf("held %d, want 0", h.Len())
	}
	if c := h.Cursor(10000); c != 10000 {
		t.Fatalf("Cursor = %d", c)
	}
	if len(h.order) != 0 {
		t.Fatalf("order keeps %d spent entries", len(h.order))
	}
}
