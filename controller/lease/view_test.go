package lease

import (
	"maps"
	"testing"
	"time"
)

// TestLeaseViewHeldBy: the leases listed for an agent follow grants, moves
// to another agent, drops and lapses (heldBy reads the per-agent index).
func TestLeaseViewHeldBy(t *testing.T) {
	v := NewView()
	now := time.Unix(1000, 0)
	ttl := 10 * time.Second
	v.PutJob("j1", Group{Job: "j1", Agent: "a", Epoch: 1}, 1, now)
	v.PutJob("j2", Group{Job: "j2", Agent: "a", Epoch: 2}, 2, now)
	v.PutJob("j3", Group{Job: "j3", Agent: "b", Epoch: 3}, 3, now.Add(-time.Minute)) // lapsed
	check := func(agent string, want map[string]uint64) {
		t.Helper()
		if got := v.HeldBy(agent, now, ttl); !maps.Equal(got, want) {
			t.Fatalf("heldBy(%s) = %v, want %v", agent, got, want)
		}
	}
	check("a", map[string]uint64{"j1": 1, "j2": 2})
	check("b", map[string]uint64{})
	v.PutJob("j1", Group{Job: "j1", Agent: "b", Epoch: 4}, 4, now) // moved
	check("a", map[string]uint64{"j2": 2})
	check("b", map[string]uint64{"j1": 4})
	v.PutJob("j1", Group{Job: "j1", Agent: "a", Epoch: 9}, 3, now) // older revision: ignored
	check("b", map[string]uint64{"j1": 4})
	v.DropJob("j2", 2)
	v.DropJob("j3", 3)
	check("a", map[string]uint64{})
	if len(v.byAgent) != 1 || len(v.byAgent["b"]) != 1 {
		t.Fatalf("index left %v", v.byAgent)
	}
}
