package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// errExecExists: the execution of a fire already exists (createRuns with fresh).
var errExecExists = errors.New("execution exists")

// placement is one execution of a fire: which agent runs it.
type placement struct {
	execID string
	agent  string // "" when no agent of a mode-any group is known yet
	shard  *protocol.ShardSlot
}

// placements returns where one fire of job at scheduled runs.
func (c *placer) placements(j protocol.Job, scheduled time.Time) ([]placement, error) {
	if j.Target.Agent != "" {
		return []placement{{execID: protocol.ExecID(j.ID, scheduled), agent: j.Target.Agent}}, nil
	}
	members := fleet.GroupMembers(j, c.agents.Snapshot())
	if j.Target.Mode == protocol.ModeAll {
		if len(members) == 0 {
			return nil, fmt.Errorf("%w: no registered agent matches target.group %q", ErrConflict, j.Target.Group)
		}
		out := make([]placement, len(members))
		for i, a := range members {
			out[i] = placement{execID: protocol.BroadcastExecID(j.ID, scheduled, i), agent: a.Agent,
				shard: &protocol.ShardSlot{Index: i, Total: len(members)}}
		}
		return out, nil
	}
	return []placement{{execID: protocol.ExecID(j.ID, scheduled), agent: c.pickRunAgent(j, members)}}, nil
}

// pickRunAgent chooses the agent of a mode-any run: rendezvous over the
// online members, else over all registered members, else none.
func (c *placer) pickRunAgent(j protocol.Job, members []protocol.AgentInfo) string {
	now := c.now()
	var online []protocol.AgentInfo
	for _, a := range members {
		if fleet.IsOnline(a, now, c.cfg.AgentOfflineAfter) {
			online = append(online, a)
		}
	}
	if len(online) > 0 {
		return fleet.Rendezvous(j.ID, online)
	}
	return fleet.Rendezvous(j.ID, members)
}

// dispatchOneShot creates the execution(s) of a one-shot job's single fire.
// It is idempotent: the exec id is deterministic, an existing execution is
// kept (and its run re-sent while PENDING). newJob says that j was created
// in this call (CreateJob): its executions cannot exist yet, so they are
// created without reading the history index or ax_execs first.
func (c *placer) dispatchOneShot(ctx context.Context, j protocol.Job, newJob bool) ([]protocol.Execution, error) {
	s, err := schedule.Parse(j.Schedule, j.CreatedAt)
	if err != nil {
		return nil, fieldError(err)
	}
	at, ok := s.Next(time.Time{})
	if !ok {
		return nil, nil
	}
	if newJob {
		return c.createRuns(ctx, j, at, "scheduled", runsOfNewJob)
	}
	return c.createRuns(ctx, j, at, "scheduled", 0)
}

// createMode says what createRuns may assume about the executions it makes.
type createMode int

const (
	// runsFresh: an existing first execution is errExecExists (TriggerJob
	// picks another time).
	runsFresh createMode = 1 << iota
	// runsOfNewJob: the job was created in this call, so its executions
	// have neither a record nor history: no read of the history index
	// (SQLite) and no read of ax_execs before the create (a create that
	// finds a record after all falls back to applyExec).
	runsOfNewJob
)

// createRuns makes the PENDING executions of one fire of j at scheduled and
// sends their run commands (attempt 1, run_at = scheduled); mode says what
// it may assume (createMode).
func (c *placer) createRuns(ctx context.Context, j protocol.Job, scheduled time.Time, reason string, mode createMode) ([]protocol.Execution, error) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	ps, err := c.placements(j, scheduled)
	if err != nil {
		return nil, err
	}
	fresh, newJob := mode&runsFresh != 0, mode&runsOfNewJob != 0
	var out []protocol.Execution
	for i, p := range ps {
		if newJob {
			// No history to look up: the job did not exist before this call.
		} else if e, ok, err := c.hist.idx.Get(ctx, p.execID); err != nil {
			return out, err
		} else if ok && e.State.Terminal() {
			// Ended, and may have left live state (retention.go): never made again.
			if v, err := c.ex.readExec(ctx, p.execID); err != nil {
				return out, err
			} else if v.Rec == nil {
				if fresh && i == 0 {
					return nil, errExecExists
				}
				out = append(out, e)
				continue
			}
		}
		ev := execution.Create{ExecID: p.execID, JobID: j.ID, Agent: p.agent, ScheduledAt: scheduled, Shard: p.shard, Reason: reason}
		var before, after *execRecord
		var effs []execution.Effect
		if newJob {
			before, after, effs, err = c.ex.createExec(ctx, ev)
		} else {
			before, after, effs, err = c.ex.applyExec(ctx, p.execID, ev, execution.Env{})
		}
		if errors.Is(err, execution.ErrExists) {
			if fresh && i == 0 {
				return nil, errExecExists
			}
			if err := c.ex.execEffects(ctx, before, &j, effs); err != nil { // the run of a PENDING one, again
				return out, err
			}
			out = append(out, before.Execution)
			continue
		}
		if err != nil {
			return out, err
		}
		if err := c.ex.execEffects(ctx, after, &j, effs); err != nil {
			return out, err
		}
		out = append(out, after.Execution)
	}
	return out, nil
}

// placeUnplaced gives the PENDING executions that wait for an agent of
// their group to agent a, if it matches. Called with assignMu held.
func (c *placer) placeUnplaced(ctx context.Context, a protocol.AgentInfo) {
	for execID, jobID := range c.unplaced {
		j, _, ok := c.jobs.Get(jobID)
		if !ok {
			c.dropUnplaced(ctx, execID, jobID)
			continue
		}
		if len(fleet.GroupMembers(j, []protocol.AgentInfo{a})) == 0 {
			continue
		}
		c.placeOne(ctx, execID, j, a)
	}
}

// placeOne gives unplaced execution execID of j to agent a and sends its
// run. Called with assignMu held.
func (c *placer) placeOne(ctx context.Context, execID string, j protocol.Job, a protocol.AgentInfo) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	_, after, effs, err := c.ex.applyExec(ctx, execID, execution.Place{Agent: a.Agent}, execution.Env{})
	if errors.Is(err, execution.ErrMovedOn) {
		delete(c.unplaced, execID)
		return
	}
	if err != nil {
		c.log.Warn("place execution", "exec", execID, "agent", a.Agent, "err", err)
		return
	}
	delete(c.unplaced, execID)
	if err := c.ex.execEffects(ctx, after, &j, effs); err != nil {
		c.log.Warn("send run of placed execution", "exec", execID, "agent", a.Agent, "err", err)
		return
	}
	c.log.Info("execution placed", "exec", execID, "agent", a.Agent)
}

// TriggerJob runs a job once now, outside its schedule: a PENDING
// execution (one per agent for mode all; the first is returned) and a run
// command.
func (c *Controller) TriggerJob(ctx context.Context, id string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if err := protocol.ValidateJobID("id", id); err != nil {
		return protocol.Execution{}, fmt.Errorf("trigger job %q: %w", id, ErrNotFound)
	}
	j, _, err := c.jobsvc.readJob(ctx, id)
	if err != nil {
		return protocol.Execution{}, err
	}
	scheduled := c.now().Truncate(time.Millisecond)
	for range 1000 {
		execs, err := c.place.createRuns(ctx, j, scheduled, "manual_trigger", runsFresh)
		if errors.Is(err, errExecExists) {
			scheduled = scheduled.Add(time.Millisecond)
			continue
		}
		if err != nil {
			return protocol.Execution{}, fmt.Errorf("trigger job %s: %w", id, err)
		}
		return execs[0], nil
	}
	return protocol.Execution{}, fmt.Errorf("trigger job %s: %w: too many triggers at once", id, ErrConflict)
}

// forgetShard drops the retry timers and group-lease bookkeeping of the
// jobs of shard n, no longer worked here (its new owner reloads them).
func (c *placer) forgetShard(n int) {
	if c.retries != nil {
		c.retries.dropWhere(func(jobID string) bool { return c.own.ShardOf(jobID) == n })
	}
	c.groups.ForgetShard(n)
}

// manageGroupLeases runs the group leases' pass of the ownership loop
// (lease.GroupLeases.Manage).
func (c *placer) manageGroupLeases(ctx context.Context, now time.Time) {
	c.groups.Manage(ctx, now)
}
