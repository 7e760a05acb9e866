package placement

import (
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

var (
	t0         = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	offline    = 30 * time.Second
	periodic   = schedule.Spec{Every: "1m"}
	oneShot    = schedule.Spec{Delay: "1h"}
	registered = t0.Add(-time.Hour)
)

// agent returns a registered agent with labels, last heard from at seen.
func agent(id string, seen time.Time, labels map[string]string) protocol.AgentInfo {
	return protocol.AgentInfo{Agent: id, Labels: labels, RegisteredAt: registered, LastSeen: seen}
}

func TestDesired(t *testing.T) {
	east := map[string]string{"site": "east"}
	agents := []protocol.AgentInfo{
		agent("a1", t0, east),
		agent("a2", t0, map[string]string{"site": "west"}),
		agent("a3", t0, east),
		{Agent: "a4", Labels: east}, // enrolled, never registered
	}
	revoked := agent("a5", t0, east)
	revoked.Revoked = true
	agents = append(agents, revoked)
	tests := []struct {
		name  string
		job   protocol.Job
		want  map[string]*protocol.ShardSlot
		fleet bool
	}{
		{"pinned", protocol.Job{ID: "j", Schedule: periodic, Target: protocol.Target{Agent: "gone"}},
			map[string]*protocol.ShardSlot{"gone": nil}, false},
		{"mode all", protocol.Job{ID: "j", Schedule: periodic, Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAll}},
			map[string]*protocol.ShardSlot{"a1": {Index: 0, Total: 2}, "a3": {Index: 1, Total: 2}}, true},
		{"mode all without members", protocol.Job{ID: "j", Schedule: periodic, Target: protocol.Target{Group: "site=north", Mode: protocol.ModeAll}},
			nil, true},
		{"mode any", protocol.Job{ID: "j", Schedule: periodic, Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAny}},
			nil, false},
		{"one-shot", protocol.Job{ID: "j", Schedule: oneShot, Target: protocol.Target{Agent: "a1"}},
			nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsFleet(tt.job); got != tt.fleet {
				t.Errorf("needsFleet = %v, want %v", got, tt.fleet)
			}
			got := desired(tt.job, agents)
			if len(got) != len(tt.want) {
				t.Fatalf("desired = %+v, want agents %v", got, tt.want)
			}
			for id, slot := range tt.want {
				a, ok := got[id]
				if !ok || a.Job.ID != tt.job.ID {
					t.Fatalf("desired = %+v: no assignment of %s to %s", got, tt.job.ID, id)
				}
				if (slot == nil) != (a.Shard == nil) || slot != nil && *slot != *a.Shard {
					t.Errorf("slot of %s = %+v, want %+v", id, a.Shard, slot)
				}
			}
		})
	}
}

func TestSameAssign(t *testing.T) {
	j := protocol.Job{ID: "j", Generation: 2}
	slot := func(i, n int) *protocol.ShardSlot { return &protocol.ShardSlot{Index: i, Total: n} }
	tests := []struct {
		name string
		a, b protocol.Assign
		want bool
	}{
		{"equal", protocol.Assign{Job: j}, protocol.Assign{Job: j}, true},
		{"equal slots", protocol.Assign{Job: j, Shard: slot(1, 3)}, protocol.Assign{Job: j, Shard: slot(1, 3)}, true},
		{"other job", protocol.Assign{Job: j}, protocol.Assign{Job: protocol.Job{ID: "k", Generation: 2}}, false},
		{"other generation", protocol.Assign{Job: j}, protocol.Assign{Job: protocol.Job{ID: "j", Generation: 3}}, false},
		{"other epoch", protocol.Assign{Job: j, Epoch: 1}, protocol.Assign{Job: j, Epoch: 2}, false},
		{"slot and none", protocol.Assign{Job: j, Shard: slot(0, 1)}, protocol.Assign{Job: j}, false},
		{"other slot", protocol.Assign{Job: j, Shard: slot(0, 2)}, protocol.Assign{Job: j, Shard: slot(1, 2)}, false},
	}
	for _, tt := range tests {
		if got := sameAssign(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: sameAssign = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGroupChange(t *testing.T) {
	base := agent("a1", t0, map[string]string{"site": "east"})
	revoked := base
	revoked.Revoked = true
	unregistered := base
	unregistered.RegisteredAt = time.Time{}
	relabelled := base
	relabelled.Labels = map[string]string{"site": "west"}
	heartbeat := base
	heartbeat.LastSeen = t0.Add(time.Minute)
	tests := []struct {
		name string
		cur  protocol.AgentInfo
		want bool
	}{
		{"heartbeat only", heartbeat, false},
		{"revoked", revoked, true},
		{"registration", unregistered, true},
		{"labels", relabelled, true},
	}
	for _, tt := range tests {
		if got := groupChange(base, tt.cur); got != tt.want {
			t.Errorf("%s: groupChange = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPlacements(t *testing.T) {
	east := map[string]string{"site": "east"}
	stale := t0.Add(-time.Hour)
	at := t0.Add(time.Minute)
	tests := []struct {
		name   string
		job    protocol.Job
		agents []protocol.AgentInfo
		want   []Placement
		err    error
	}{
		{"pinned", protocol.Job{ID: "j", Target: protocol.Target{Agent: "a9"}}, nil,
			[]Placement{{ExecID: protocol.ExecID("j", at), Agent: "a9"}}, nil},
		{"mode all", protocol.Job{ID: "j", Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAll}},
			[]protocol.AgentInfo{agent("a1", t0, east), agent("a2", stale, east)},
			[]Placement{
				{ExecID: protocol.BroadcastExecID("j", at, 0), Agent: "a1", Shard: &protocol.ShardSlot{Index: 0, Total: 2}},
				{ExecID: protocol.BroadcastExecID("j", at, 1), Agent: "a2", Shard: &protocol.ShardSlot{Index: 1, Total: 2}},
			}, nil},
		{"mode all without members", protocol.Job{ID: "j", Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAll}},
			nil, nil, ErrNoMember},
		{"mode any: the online member", protocol.Job{ID: "j", Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAny}},
			[]protocol.AgentInfo{agent("a1", stale, east), agent("a2", t0, east), agent("a3", stale, east)},
			[]Placement{{ExecID: protocol.ExecID("j", at), Agent: "a2"}}, nil},
		{"mode any: none", protocol.Job{ID: "j", Target: protocol.Target{Group: "site=east", Mode: protocol.ModeAny}},
			nil, []Placement{{ExecID: protocol.ExecID("j", at), Agent: ""}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := placements(tt.job, at, func() []protocol.AgentInfo { return tt.agents },
				func() time.Time { return t0 }, offline)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("placements error = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("placements = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.ExecID != w.ExecID || g.Agent != w.Agent || (g.Shard == nil) != (w.Shard == nil) || g.Shard != nil && *g.Shard != *w.Shard {
					t.Errorf("placement %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestPickRunAgent: the rendezvous pick among the online members, else
// among all registered members; the same agent as long as it is among
// them.
func TestPickRunAgent(t *testing.T) {
	stale := t0.Add(-time.Hour)
	j := protocol.Job{ID: "j"}
	all := []protocol.AgentInfo{agent("a1", stale, nil), agent("a2", stale, nil), agent("a3", stale, nil)}
	if got := pickRunAgent(j, nil, t0, offline); got != "" {
		t.Errorf("no members: %q, want none", got)
	}
	first := pickRunAgent(j, all, t0, offline)
	if first == "" {
		t.Fatal("all offline: no agent, want one of the registered members")
	}
	if again := pickRunAgent(j, all, t0, offline); again != first {
		t.Errorf("pick moved from %s to %s with the same members", first, again)
	}
	for i := range all {
		online := append([]protocol.AgentInfo(nil), all...)
		online[i].LastSeen = t0
		if got := pickRunAgent(j, online, t0, offline); got != online[i].Agent {
			t.Errorf("only %s online: picked %s", online[i].Agent, got)
		}
	}
}
