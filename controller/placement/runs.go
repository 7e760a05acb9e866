package placement

import (
	"fmt"
	"time"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
)

// Placement is one execution of a fire: which agent runs it.
type Placement struct {
	ExecID string
	Agent  string // "" when no agent of a mode-any group is known yet
	Shard  *protocol.ShardSlot
}

// Placements returns where one fire of job j at scheduled runs: on its
// pinned agent (target.agent); on every member of its group, each with
// its shard slot (mode all; none is an error matching ErrNoMember); or on
// one member (mode any, pickRunAgent), "" when there is none yet. It
// takes no lock.
func (p *Placer) Placements(j protocol.Job, scheduled time.Time) ([]Placement, error) {
	return placements(j, scheduled, p.agents.Snapshot, p.now, p.cfg.AgentOfflineAfter)
}

// placements is Placements over the agents agents returns (called only
// for a group job), with the time now and the offline threshold after.
func placements(j protocol.Job, scheduled time.Time, agents func() []protocol.AgentInfo, now func() time.Time, after time.Duration) ([]Placement, error) {
	if j.Target.Agent != "" {
		return []Placement{{ExecID: protocol.ExecID(j.ID, scheduled), Agent: j.Target.Agent}}, nil
	}
	members := fleet.GroupMembers(j, agents())
	if j.Target.Mode == protocol.ModeAll {
		if len(members) == 0 {
			return nil, fmt.Errorf("%w: no registered agent matches target.group %q", ErrNoMember, j.Target.Group)
		}
		out := make([]Placement, len(members))
		for i, a := range members {
			out[i] = Placement{ExecID: protocol.BroadcastExecID(j.ID, scheduled, i), Agent: a.Agent,
				Shard: &protocol.ShardSlot{Index: i, Total: len(members)}}
		}
		return out, nil
	}
	return []Placement{{ExecID: protocol.ExecID(j.ID, scheduled), Agent: pickRunAgent(j, members, now(), after)}}, nil
}

// pickRunAgent chooses the agent of a mode-any run: rendezvous over the
// members online at now, else over all registered members, else none.
func pickRunAgent(j protocol.Job, members []protocol.AgentInfo, now time.Time, after time.Duration) string {
	var online []protocol.AgentInfo
	for _, a := range members {
		if fleet.IsOnline(a, now, after) {
			online = append(online, a)
		}
	}
	if len(online) > 0 {
		return fleet.Rendezvous(j.ID, online)
	}
	return fleet.Rendezvous(j.ID, members)
}
