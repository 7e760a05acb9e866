package admission

import (
	"fmt"
	"testing"
	"time"
)

// step is one call in a table test: at t after the start, admit (and
// expect ok, and a wait of at least wait when refused), release or
// forget agent id.
type step struct {
	t    time.Duration
	op   string // "admit", "release", "forget"
	id   string
	ok   bool
	wait time.Duration
}

func TestAdmissions(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	admit := func(at time.Duration, id string, ok bool, wait time.Duration) step {
		return step{t: at, op: "admit", id: id, ok: ok, wait: wait}
	}
	release := func(at time.Duration, id string) step { return step{t: at, op: "release", id: id} }
	forget := func(at time.Duration, id string) step { return step{t: at, op: "forget", id: id} }
	for _, tc := range []struct {
		name  string
		b     Bounds
		steps []step
	}{
		{"zero bounds admit everything", Bounds{}, []step{
			admit(0, "a", true, 0), admit(0, "a", true, 0), admit(0, "a", true, 0),
		}},
		{"waiting bound, then released", Bounds{Waiting: 1}, []step{
			admit(0, "a", true, 0), admit(0, "a", false, time.Second), admit(0, "b", true, 0),
			release(0, "a"), admit(0, "a", true, 0),
		}},
		{"one a second", Bounds{Waiting: 1, Burst: 1, Every: time.Second}, []step{
			admit(0, "a", true, 0), release(0, "a"),
			admit(300*time.Millisecond, "a", false, 700*time.Millisecond),
			admit(time.Second, "a", true, 0), release(time.Second, "a"),
		}},
		{"burst then the rate", Bounds{Burst: 3, Every: time.Second}, []step{
			admit(0, "a", true, 0), admit(0, "a", true, 0), admit(0, "a", true, 0),
			admit(0, "a", false, time.Second), admit(0, "b", true, 0),
			admit(1500*time.Millisecond, "a", true, 0), admit(1500*time.Millisecond, "a", false, 500*time.Millisecond),
			admit(10*time.Second, "a", true, 0), admit(10*time.Second, "a", true, 0), admit(10*time.Second, "a", true, 0),
			admit(10*time.Second, "a", false, time.Second),
		}},
		{"a forgotten admission gives its token back", Bounds{Waiting: 1, Burst: 1, Every: time.Minute}, []step{
			admit(0, "a", true, 0), forget(0, "a"), admit(0, "a", true, 0), admit(0, "a", false, time.Minute),
		}},
		{"release of an agent not seen is a no-op", Bounds{Waiting: 1}, []step{
			release(0, "a"), admit(0, "a", true, 0), admit(0, "a", false, time.Second),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.b)
			for i, s := range tc.steps {
				now := t0.Add(s.t)
				switch s.op {
				case "admit":
					ok, wait := a.Admit(s.id, now)
					if ok != s.ok || (!ok && wait < s.wait) || (ok && wait != 0) {
						t.Fatalf("step %d: Admit(%s, +%s) = %v, %s; want %v, at least %s", i, s.id, s.t, ok, wait, s.ok, s.wait)
					}
				case "release":
					a.Release(s.id)
				case "forget":
					a.Forget(s.id)
				}
			}
		})
	}
}

// TestSweepKeepsOnlyAgentsStillBounded: the map is swept once it reaches
// its size; agents back at their full allowance go, those still waiting
// or short of tokens stay.
func TestSweepKeepsOnlyAgentsStillBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a := New(Bounds{Waiting: 1, Burst: 1, Every: time.Second})
	a.Admit("waiting", t0) // never released
	a.Admit("recent", t0.Add(5*time.Second))
	a.Release("recent")
	for i := range sweepMin - 3 {
		id := fmt.Sprintf("old-%d", i)
		a.Admit(id, t0)
		a.Release(id)
	}
	if n := a.Len(); n != sweepMin-1 {
		t.Fatalf("%d agents before the sweep, want %d", n, sweepMin-1)
	}
	// The admission that reaches sweepMin sweeps: at +5.5s the old ones
	// have their token back, "recent" (admitted at +5s) not yet.
	a.Admit("new", t0.Add(5500*time.Millisecond))
	if n := a.Len(); n != 3 {
		t.Fatalf("%d agents after the sweep, want 3 (waiting, recent, new)", n)
	}
	if ok, _ := a.Admit("waiting", t0.Add(time.Minute)); ok {
		t.Fatal("an agent still waiting was admitted again after the sweep")
	}
}
