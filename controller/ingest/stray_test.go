package ingest

import (
	"fmt"
	"testing"
	"time"
)

// TestStrayLimits: a stray unassign goes once per agent and job per
// window, at most strayPerAgent per agent per window, and again after
// the window; one agent's strays do not use another's.
func TestStrayLimits(t *testing.T) {
	var s strays
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if !s.admit(t0, "a", "j1") {
		t.Fatal("first stray of a/j1 refused")
	}
	if s.admit(t0.Add(time.Second), "a", "j1") {
		t.Fatal("a/j1 admitted twice in one window")
	}
	for i := 2; i <= strayPerAgent; i++ {
		if !s.admit(t0.Add(time.Second), "a", fmt.Sprintf("j%d", i)) {
			t.Fatalf("stray %d of agent a refused, limit %d", i, strayPerAgent)
		}
	}
	if s.admit(t0.Add(2*time.Second), "a", "j-over") {
		t.Fatalf("stray %d of agent a admitted, limit %d", strayPerAgent+1, strayPerAgent)
	}
	if !s.admit(t0.Add(2*time.Second), "b", "j1") {
		t.Fatal("agent b refused because of agent a's strays")
	}
	next := t0.Add(strayWindow)
	if !s.admit(next, "a", "j1") || !s.admit(next, "a", "j-over") {
		t.Fatal("agent a still limited in the next window")
	}
	if !s.admit(next.Add(-time.Hour), "a", "j1") {
		t.Fatal("a clock step back did not start a new window")
	}
}
