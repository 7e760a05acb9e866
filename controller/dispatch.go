package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// errExecExists: the execution of a fire already exists (createRuns with fresh).
var errExecExists = errors.New("execution exists")

// onJobChanged sends the commands of a stored change of a job: created
// (old nil), updated or deleted (next nil). They go out through the
// driver (controller/driver): from this replica when it works the job's
// shard, else from the replica that does; the caller's write op stays
// open until they are sent.
func (c *jobService) onJobChanged(ctx context.Context, old, next *protocol.Job, rev uint64) {
	if c.hooks.beforeJobDispatch != nil {
		c.hooks.beforeJobDispatch()
	}
	// The change is stored: its commands must go out even when the API
	// caller whose request made it goes away now (a cancelled request
	// context left a one-shot job stored without an execution).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	ch := driver.Change{Old: old, Next: next, Rev: rev}
	if route, err := c.driver.Drive(ctx, ch); errors.Is(err, driver.ErrNotAsked) {
		// Said once, with the ErrSilent that started the hold.
		c.log.Debug("job change: sent from here, its shard's owner silent lately", "job", ch.JobID(), "err", err)
	} else if err != nil {
		c.log.Warn("job change: the owner of its shard did not send its commands; sent from here", "job", ch.JobID(), "route", route, "err", err)
	}
}

// dispatchChange is the driver's Host.Dispatch, run on the replica that
// works the job's shard (or as the driver's fallback): the assignment
// diff for periodic jobs (the placement's AssignChange), a PENDING
// execution and run command for one-shot jobs, one write op. Both go
// toward the newest version of the job the cache holds when the change
// was overtaken by a later one (two replicas' API calls, a forwarded
// request that arrived late): the assignment diff from old to that
// version (decided under the assign lock, AssignChange), the one-shot
// dispatch on it. So an older generation is never sent after a newer one,
// and the agents end with the newest assignments either way.
func (c *jobService) dispatchChange(ctx context.Context, ch driver.Change) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		c.log.Warn("job change not sent: the replica is stopping", "job", ch.JobID(), "err", err)
		return
	}
	if ch.Next == nil {
		// A delete: its marker leaves ax_jobs once the job's executions
		// have left live state (the retention's sweeper).
		c.ret.NoteDeleted(ch.JobID())
	}
	c.place.AssignChange(ctx, ch.Old, ch.Next, ch.Rev)
	if next := c.jobs.Latest(ch.JobID(), ch.Rev, ch.Next); next != nil && !next.Periodic() && !next.Paused {
		if _, err := c.ex.dispatchOneShot(ctx, *next, ch.Old == nil); err != nil {
			c.log.Error("dispatch one-shot job", "job", next.ID, "err", err)
		}
	}
}

// dispatchOneShot creates the execution(s) of a one-shot job's single fire.
// It is idempotent: the exec id is deterministic, an existing execution is
// kept (and its run re-sent while PENDING). newJob says that j was created
// in this call (CreateJob): its executions cannot exist yet, so they are
// created without reading the history index or ax_execs first.
func (c *execService) dispatchOneShot(ctx context.Context, j protocol.Job, newJob bool) ([]protocol.Execution, error) {
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
	// runsNotSent: the run commands are not sent; the caller sends those
	// AX_CMD lacks (the reload's createMissingOneShots: the job's create
	// may have sent them before the crash that lost the record).
	runsNotSent
)

// withoutSendRun returns effs without its SendRun effects.
func withoutSendRun(effs []execution.Effect) []execution.Effect {
	out := effs[:0:0]
	for _, e := range effs {
		if _, ok := e.(execution.SendRun); !ok {
			out = append(out, e)
		}
	}
	return out
}

// createRuns makes the PENDING executions of one fire of j at scheduled and
// sends their run commands (attempt 1, run_at = scheduled); mode says what
// it may assume (createMode).
func (c *execService) createRuns(ctx context.Context, j protocol.Job, scheduled time.Time, reason string, mode createMode) ([]protocol.Execution, error) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	ps, err := c.place.Placements(j, scheduled)
	if err != nil {
		return nil, placementErr(err)
	}
	fresh, newJob, notSent := mode&runsFresh != 0, mode&runsOfNewJob != 0, mode&runsNotSent != 0
	var out []protocol.Execution
	for i, p := range ps {
		if newJob {
			// No history to look up: the job did not exist before this call.
		} else if e, ok, err := c.hist.idx.Get(ctx, p.ExecID); err != nil {
			return out, err
		} else if ok && e.State.Terminal() {
			// Ended, and may have left live state (controller/retention): never made again.
			if v, err := c.ex.readExec(ctx, p.ExecID); err != nil {
				return out, err
			} else if v.Rec == nil {
				if fresh && i == 0 {
					return nil, errExecExists
				}
				out = append(out, e)
				continue
			}
		}
		ev := execution.Create{ExecID: p.ExecID, JobID: j.ID, Agent: p.Agent, ScheduledAt: scheduled, Shard: p.Shard, Reason: reason}
		var before, after *execRecord
		var effs []execution.Effect
		if newJob {
			before, after, effs, err = c.ex.createExec(ctx, ev)
		} else {
			before, after, effs, err = c.ex.applyExec(ctx, p.ExecID, ev, execution.Env{})
		}
		if notSent {
			effs = withoutSendRun(effs)
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
		execs, err := c.ex.createRuns(ctx, j, scheduled, "manual_trigger", runsFresh)
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
