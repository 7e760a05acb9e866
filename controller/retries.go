package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/wheel"
)

// retryItem is a timer on the retry wheel: attempt Attempt of ExecID
// failed; when it fires, attempt Attempt+1 is sent to the agent.
type retryItem struct {
	ExecID  string
	Attempt int
	JobID   string
}

// retrier owns the retry timers: a pkg/wheel Driver and the handle of
// each execution's pending timer. Fired items are queued and handled on
// their own goroutine so the wheel never waits for NATS.
type retrier struct {
	c *core
	d *wheel.Driver[retryItem]

	mu      sync.Mutex
	handles map[string]retryEntry // exec id → pending timer
	queue   []retryItem
	signal  chan struct{}
}

type retryEntry struct {
	h       wheel.Handle
	attempt int
	jobID   string
}

func newRetrier(c *core) (*retrier, error) {
	r := &retrier{c: c, handles: map[string]retryEntry{}, signal: make(chan struct{}, 1)}
	d, err := wheel.NewDriver[retryItem](wheel.DefaultConfig(), c.clk, r.fired)
	if err != nil {
		return nil, err
	}
	r.d = d
	return r, nil
}

// schedule arms the timer of an execution of job jobID waiting after
// attempt, replacing the timer of an earlier attempt. A timer of the same
// or a later attempt is kept: attempts only grow, so an earlier one comes
// from a stale read of the record (a shard reload's scan that read it
// before a report moved it on); replacing the later timer with it left
// the execution RETRY_WAITING with no timer at all (the stale one fires,
// finds its attempt no longer due, and sends nothing).
func (r *retrier) schedule(execID, jobID string, attempt int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.handles[execID]; ok {
		if e.attempt >= attempt {
			return
		}
		r.d.Cancel(e.h)
	}
	r.handles[execID] = retryEntry{h: r.d.Add(at, retryItem{ExecID: execID, Attempt: attempt, JobID: jobID}), attempt: attempt, jobID: jobID}
	r.c.m.retriesPending.Set(float64(len(r.handles)))
}

// dropWhere drops the pending timers of the executions whose job is in
// (a shard given away: its new owner reloads them).
func (r *retrier) dropWhere(in func(jobID string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.handles {
		if in(e.jobID) {
			r.d.Cancel(e.h)
			delete(r.handles, id)
		}
	}
	r.c.m.retriesPending.Set(float64(len(r.handles)))
}

// cancel drops the pending timer of an execution, if any.
func (r *retrier) cancel(execID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.handles[execID]; ok {
		r.d.Cancel(e.h)
		delete(r.handles, execID)
		r.c.m.retriesPending.Set(float64(len(r.handles)))
	}
}

// fired is the wheel's callback (on the Run goroutine): queue and signal.
func (r *retrier) fired(it retryItem) {
	r.mu.Lock()
	if e, ok := r.handles[it.ExecID]; ok && e.attempt == it.Attempt {
		delete(r.handles, it.ExecID)
		r.c.m.retriesPending.Set(float64(len(r.handles)))
	}
	r.queue = append(r.queue, it)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *retrier) stop() { r.d.Stop() }

// run drives the wheel and handles fired timers until ctx ends.
func (r *retrier) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.d.Run(ctx)
	}()
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.signal:
		}
		for {
			r.mu.Lock()
			if len(r.queue) == 0 {
				r.mu.Unlock()
				break
			}
			it := r.queue[0]
			r.queue = r.queue[1:]
			r.mu.Unlock()
			if err := r.c.ex.fireRetry(ctx, it); err != nil && ctx.Err() == nil {
				wait := time.Second
				if errors.Is(err, errNoHolder) {
					// A grant re-arms it too (settleEpochs); this is the fallback.
					wait = max(r.c.cfg.LeaseTTL/2, time.Second)
					r.c.log.Debug("retry waits for its group job's lease holder", "exec", it.ExecID, "attempt", it.Attempt+1, "in", wait)
				} else {
					r.c.log.Warn("retry not sent, trying again in 1s", "exec", it.ExecID, "attempt", it.Attempt+1, "err", err)
				}
				r.mu.Lock()
				if _, ok := r.handles[it.ExecID]; !ok {
					r.handles[it.ExecID] = retryEntry{h: r.d.Add(r.c.clk.Now().Add(wait), it), attempt: it.Attempt, jobID: it.JobID}
					r.c.m.retriesPending.Set(float64(len(r.handles)))
				}
				r.mu.Unlock()
			}
		}
	}
}

// errNoHolder: a retry of a group job waits for the job's lease to have a
// holder (it is sent to whoever holds it when it fires).
var errNoHolder = errors.New("the group job's lease has no holder now")

// fireRetry sends the run command of the next attempt of an execution that
// is still RETRY_WAITING after attempt it.Attempt (execution.RetryDue):
// the execution stays RETRY_WAITING until the agent reports the new
// attempt triggered, and the record says first which attempt is sent to
// whom. A retry of a group job goes to the holder of the job's lease now.
// The retry of a job deleted meanwhile cancels the execution
// (execution.JobDeleted).
func (c *execService) fireRetry(ctx context.Context, it retryItem) error {
	job, ok, err := c.jobsvc.knownJob(ctx, it.JobID)
	if err != nil {
		return err // not taken for a deleted job: tried again
	}
	var ev execution.Event = execution.JobDeleted{Attempt: it.Attempt}
	if ok {
		due := execution.RetryDue{Attempt: it.Attempt, GroupAny: job.GroupAny()}
		if due.GroupAny {
			due.Holder, due.HolderEpoch, due.Held = c.groups.CurrentHolder(job.ID)
		}
		ev = due
	}
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	before, after, effs, err := c.applyExec(ctx, it.ExecID, ev, c.envOf(it.JobID))
	switch {
	case errors.Is(err, execution.ErrMovedOn):
		// Moved on meanwhile (cancelled, already triggered), or waiting
		// after a later attempt: that one has its own timer, armed again
		// here in case a stale schedule took its place (a no-op when it
		// is pending; a fired one re-sends the same run, which the agent
		// takes once).
		if before != nil && before.State == protocol.StateRetryWaiting && before.Attempt > it.Attempt {
			c.retries.schedule(before.ExecID, before.JobID, before.Attempt, before.NextAttemptAt)
		}
		return nil
	case errors.Is(err, execution.ErrNoHolder):
		return errNoHolder
	case errors.Is(err, execution.ErrNoAgent):
		c.log.Warn("retry has no agent to run on", "exec", it.ExecID)
		return nil
	case err != nil:
		return err
	}
	rec := before
	if after != nil {
		rec = after
		if after.Agent != before.Agent || after.Epoch != before.Epoch {
			c.log.Info("retry goes to the job's lease holder", "exec", rec.ExecID, "attempt", it.Attempt+1,
				"from_agent", before.Agent, "from_epoch", before.Epoch, "agent", after.Agent, "epoch", after.Epoch)
		}
	}
	if !ok {
		return c.execEffects(ctx, rec, nil, effs)
	}
	if err := c.execEffects(ctx, rec, &job, effs); err != nil {
		return err
	}
	c.log.Info("retry sent", "exec", rec.ExecID, "job", rec.JobID, "attempt", it.Attempt+1, "agent", rec.Agent, "epoch", rec.Epoch)
	return nil
}
