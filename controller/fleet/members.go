package fleet

import (
	"hash/fnv"

	"github.com/axsched/ax/pkg/protocol"
)

// Group membership: which agents a group job may go to, and which of them
// it goes to. The controller's placement (assignments, runs, unplaced
// executions, report authorization) and its group leases
// (controller/lease) share these rules.

// GroupMembers returns the registered, non-revoked agents matching j's
// selector (target.group), in the order given; none when the selector
// does not parse.
func GroupMembers(j protocol.Job, agents []protocol.AgentInfo) []protocol.AgentInfo {
	sel, err := protocol.ParseSelector("target.group", j.Target.Group)
	if err != nil {
		return nil
	}
	var out []protocol.AgentInfo
	for _, a := range agents {
		if InGroup(a, sel) {
			out = append(out, a)
		}
	}
	return out
}

// InGroup reports whether agent a is a member of the group sel: it has
// registered (an agent only enrolled is not), is not revoked, and its
// labels (the controller's, see labels.go) match.
func InGroup(a protocol.AgentInfo, sel protocol.Selector) bool {
	return !a.Revoked && Registered(a) && sel.Matches(a.Labels)
}

// Rendezvous picks, of agents, the one with the highest hash of (job,
// agent) ("" when there is none): a job goes to the same agent as long as
// that agent is among those given.
func Rendezvous(jobID string, agents []protocol.AgentInfo) string {
	best, bestScore := "", uint64(0)
	for _, a := range agents {
		h := fnv.New64a()
		_, _ = h.Write([]byte(jobID))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(a.Agent))
		if s := h.Sum64(); best == "" || s > bestScore {
			best, bestScore = a.Agent, s
		}
	}
	return best
}
