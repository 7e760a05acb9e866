package placement

import (
	"context"
	"maps"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
)

// Assignment of periodic jobs (every, cron) to agents through AX_CMD:
//
//   - pinned (target.agent): assigned to that agent, registered or not;
//   - mode all: assigned to every registered agent whose labels match the
//     selector, each with ShardSlot{Index, Total} in agent-id order; an
//     agent joining or leaving the group re-slots every member;
//   - mode any: leased to one live agent of the group with an epoch, by the
//     replica that works the job's shard (controller/lease's GroupLeases);
//     desired leaves these jobs out.
//
// Decisions are serialized by the assign lock (Env.Assign). A change is a
// diff between the desired assignments before and after it: agents that
// lose a job get unassign, agents that gain it or whose assignment changed
// (generation, shard slot) get assign.

// desired returns the assignments of job j given the agents (sorted by id).
func desired(j protocol.Job, agents []protocol.AgentInfo) map[string]protocol.Assign {
	if !j.Periodic() || j.GroupAny() {
		return nil
	}
	if j.Target.Agent != "" {
		return map[string]protocol.Assign{j.Target.Agent: {Job: j}}
	}
	members := fleet.GroupMembers(j, agents)
	if len(members) == 0 {
		return nil
	}
	out := map[string]protocol.Assign{}
	for i, a := range members {
		out[a.Agent] = protocol.Assign{Job: j, Shard: &protocol.ShardSlot{Index: i, Total: len(members)}}
	}
	return out
}

// needsFleet reports whether desired(j, agents) depends on agents: a
// periodic group job of mode all.
func needsFleet(j protocol.Job) bool {
	return j.Periodic() && !j.GroupAny() && j.Target.Agent == ""
}

// groupChange reports whether an agent's record moving from prev to cur
// may change the groups it is a member of (fleet.InGroup).
func groupChange(prev, cur protocol.AgentInfo) bool {
	return prev.Revoked != cur.Revoked || fleet.Registered(prev) != fleet.Registered(cur) || !maps.Equal(prev.Labels, cur.Labels)
}

func sameAssign(a, b protocol.Assign) bool {
	if a.Job.ID != b.Job.ID || a.Job.Generation != b.Job.Generation || a.Epoch != b.Epoch {
		return false
	}
	if (a.Shard == nil) != (b.Shard == nil) {
		return false
	}
	return a.Shard == nil || *a.Shard == *b.Shard
}

// applyDiff sends the commands that turn assignments before into after;
// force(agent) re-sends an unchanged assignment (an agent that may have
// missed it). An unassign says the generation gen the job is taken at, so
// that the agent refuses an assign of an older generation that comes
// after it (agent/store: removed). Errors are logged (and counted in failed): an agent that
// misses a command gets its assignments again when it re-registers with a
// stale cursor.
func (p *Placer) applyDiff(ctx context.Context, jobID string, gen uint64, before, after map[string]protocol.Assign, force func(string) bool, reason string) (failed int) {
	for agent := range before {
		if _, ok := after[agent]; ok {
			continue
		}
		cmd := protocol.Command{Kind: protocol.CmdUnassign, Agent: agent, Unassign: &protocol.Unassign{JobID: jobID, Generation: gen, Reason: reason}}
		if err := p.host.PublishCommand(ctx, cmd, ""); err != nil {
			p.log.Error("send unassign", "job", jobID, "agent", agent, "err", err)
			failed++
			continue
		}
		p.log.Info("job unassigned", "job", jobID, "agent", agent, "reason", reason)
	}
	for agent, a := range after {
		if b, ok := before[agent]; ok && sameAssign(a, b) && (force == nil || !force(agent)) {
			continue
		}
		a := a
		cmd := protocol.Command{Kind: protocol.CmdAssign, Agent: agent, Assign: &a}
		if err := p.host.PublishCommand(ctx, cmd, ""); err != nil {
			p.log.Error("send assign", "job", jobID, "agent", agent, "err", err)
			failed++
			continue
		}
		attrs := []any{"job", jobID, "agent", agent, "generation", a.Job.Generation, "paused", a.Job.Paused, "reason", reason}
		if a.Shard != nil {
			attrs = append(attrs, "shard_index", a.Shard.Index, "shard_total", a.Shard.Total)
		}
		p.log.Info("job assigned", attrs...)
	}
	return failed
}

// AssignChange sends the assignment diff of a created (old nil), updated
// or deleted (next nil) job, stored at revision rev of ax_jobs; of a
// deleted one, it cancels the executions waiting for an agent. When the
// job cache holds a newer revision than rev (the change was overtaken by
// a later one whose diff may have gone out already), the diff goes from
// old to that newer version instead of next, decided under the assign
// lock: an older generation is never sent after a newer one. rev 0 takes
// next as it is. It takes the assign lock.
func (p *Placer) AssignChange(ctx context.Context, old, next *protocol.Job, rev uint64) {
	p.assign.Lock()
	if rev > 0 {
		id := ""
		if next != nil {
			id = next.ID
		} else if old != nil {
			id = old.ID
		}
		next = p.jobs.Latest(id, rev, next)
	}
	var agents []protocol.AgentInfo
	if old != nil && needsFleet(*old) || next != nil && needsFleet(*next) {
		agents = p.agents.Snapshot() // O(agents): only for a group job of mode all
	}
	var before, after map[string]protocol.Assign
	id := ""
	if old != nil {
		before, id = desired(*old, agents), old.ID
	}
	if next != nil {
		after, id = desired(*next, agents), next.ID
	}
	reason := "job updated"
	var gen uint64 // what an unassign takes the job at: the new generation
	switch {
	case old == nil:
		reason = "job created"
	case next == nil:
		// Deleted: one past its last, so that no assign of it is taken
		// after the unassign.
		reason, gen = "job deleted", old.Generation+1
	}
	if next != nil {
		gen = next.Generation
	}
	p.applyDiff(ctx, id, gen, before, after, nil, reason)
	if next == nil {
		p.cancelUnplacedOf(ctx, id)
	}
	p.assign.Unlock()
}

// Reassign sends again the assignments periodic jobs js have on the
// current fleet (not those of group jobs of mode any: their leases carry
// them), to agents that may have missed them: a job's change stored by a
// controller killed before its commands went out (the reload's repair).
// It takes the assign lock and returns how many jobs it re-sent, and
// false when a command could not be published.
func (p *Placer) Reassign(ctx context.Context, js []protocol.Job, reason string) (n int, ok bool) {
	p.assign.Lock()
	defer p.assign.Unlock()
	var agents []protocol.AgentInfo
	ok = true
	for _, j := range js {
		if needsFleet(j) && agents == nil {
			agents = p.agents.Snapshot()
		}
		a := desired(j, agents)
		if len(a) == 0 {
			continue
		}
		if p.applyDiff(ctx, j.ID, j.Generation, a, a, func(string) bool { return true }, reason) > 0 {
			ok = false
		}
		n++
	}
	return n, ok
}

// ReconcileAgent adjusts assignments after agent cur (re)registered; prev
// is its record before (nil when new). resend re-sends every assignment of
// the agent (new agent, or its cursor is behind the stream). Called with
// the assign lock held (fleet.Host).
func (p *Placer) ReconcileAgent(ctx context.Context, prev *protocol.AgentInfo, cur protocol.AgentInfo, resend bool) {
	if !resend && prev != nil && !groupChange(*prev, cur) {
		// No group it is in changes and nothing is re-sent: its
		// registration costs nothing here, whatever the job count.
		return
	}
	// The fleet before and after, copied only when a job needs it (a
	// registration with no group job to adjust does not copy every agent).
	var afterAgents, beforeAgents []protocol.AgentInfo
	copyFleet := func() {
		if afterAgents != nil {
			return
		}
		afterAgents = p.agents.Snapshot()
		beforeAgents = make([]protocol.AgentInfo, 0, len(afterAgents))
		for _, a := range afterAgents {
			if a.Agent != cur.Agent {
				beforeAgents = append(beforeAgents, a)
			} else if prev != nil {
				beforeAgents = append(beforeAgents, *prev)
			}
		}
	}
	force := func(agent string) bool { return resend && agent == cur.Agent }
	if resend {
		// Only the agent's own pinned jobs, not every job of the controller.
		for _, j := range p.jobs.PinnedTo(cur.Agent) {
			a := desired(j, nil) // a pinned job's does not depend on the fleet
			p.applyDiff(ctx, j.ID, j.Generation, a, a, force, "agent registered")
		}
	}
	for _, j := range p.jobs.GroupAllJobs() {
		sel, err := protocol.ParseSelector("target.group", j.Target.Group)
		if err != nil {
			continue
		}
		was := prev != nil && fleet.InGroup(*prev, sel)
		is := fleet.InGroup(cur, sel)
		if !was && !is {
			continue
		}
		if was == is && !resend {
			continue
		}
		copyFleet()
		p.applyDiff(ctx, j.ID, j.Generation, desired(j, beforeAgents), desired(j, afterAgents), force, "group membership changed")
	}
}
