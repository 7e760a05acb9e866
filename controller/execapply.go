package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/pkg/protocol"
)

// applyExec applies ev to the current record of execution id with
// execution.Apply and writes the result with compare-and-set, reading and
// applying again on a conflict. It returns the record before and after
// (after is nil when nothing was written) and the effects to execute
// (execEffects); err is Apply's refusal (a *execution.Rejection) or a
// store error. env.Now is set to the controller's time of each try.
//
// ctx carries the write op (writemark) the change runs as; a store error
// whose outcome is unknown fails it.
func (c *execService) applyExec(ctx context.Context, id string, ev execution.Event, env execution.Env) (before, after *execRecord, effs []execution.Effect, err error) {
	op, err := c.opWrite(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	for range 20 {
		cur, err := c.readExec(ctx, id)
		if err != nil {
			return nil, nil, nil, err
		}
		env.Now = c.now()
		next, effs, err := execution.Apply(cur.Rec, ev, env)
		if err != nil || next == nil {
			return cur.Rec, nil, effs, err
		}
		if _, err := c.execs().Put(ctx, cur, next); errors.Is(err, execstore.ErrCASConflict) {
			continue
		} else if err != nil {
			op.Fail()
			return cur.Rec, nil, nil, err
		}
		return cur.Rec, next, effs, nil
	}
	return nil, nil, nil, fmt.Errorf("execution %s: %w: too much contention", id, ErrConflict)
}

// createExec is applyExec of a Create for an execution that has no record
// (one of a job created in this call): the record is written with a KV
// create, without reading it first. A record found there after all (a
// conflict) is handled as applyExec does, reading it.
func (c *execService) createExec(ctx context.Context, ev execution.Create) (before, after *execRecord, effs []execution.Effect, err error) {
	op, err := c.opWrite(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	next, effs, err := execution.Apply(nil, ev, execution.Env{Now: c.now()})
	if err != nil || next == nil {
		return nil, nil, effs, err
	}
	rev, err := c.execs().Put(ctx, execstore.Version{}, next)
	if errors.Is(err, execstore.ErrCASConflict) {
		return c.applyExec(ctx, ev.ExecID, ev, execution.Env{})
	} else if err != nil {
		op.Fail()
		return nil, nil, nil, err
	}
	c.ingest.NoteCreated(execstore.Version{Rec: next, Rev: rev})
	return nil, next, effs, nil
}

// startEffects executes effects of execution.Apply, in order, for record
// rec (the record written, or the current one when nothing was). job is
// the job of a SendRun (nil: from the job cache). Events are published
// asynchronously: their futures are returned, and evErr is true when one
// could not be sent at all. A command that could not be sent stops the
// effects after it and is the error. Either fails the write op ctx
// carries, if any (a report lane's effects run without one: the lane
// publishes a failed event again before it applies the reports behind its
// report, and acknowledges that report only once the event is stored).
func (c *execService) startEffects(ctx context.Context, rec *execRecord, job *protocol.Job, effs []execution.Effect) (futs []jetstream.PubAckFuture, evErr bool, err error) {
	op := writemark.From(ctx)
	defer func() {
		if evErr || err != nil {
			op.Fail()
		}
	}()
	// The transitions of one change (the steps of one report) make one
	// event, published at the last of them: from the first one's from,
	// via the states in between (protocol.Event.Via).
	var from protocol.State
	var via []protocol.State
	event := func(i int, snap *execRecord, t execution.Transition) {
		if len(via) == 0 {
			from = t.From // the first of its change
		}
		if execution.Chained(effs, i) {
			via = append(via, t.To)
			return
		}
		if f := c.publishEvent(snap, transition{from: from, via: via, to: t.To, reason: t.Reason}); f != nil {
			futs = append(futs, f)
		} else {
			evErr = true
		}
		via = nil
	}
	for i, e := range effs {
		switch e := e.(type) {
		case execution.Transitioned:
			c.noteTransition(&e.Snapshot, transition{from: e.T.From, to: e.T.To, reason: e.T.Reason})
			event(i, &e.Snapshot, e.T)
		case execution.ReplayEvent:
			event(i, &e.Snapshot, e.T)
		case execution.ScheduleRetry:
			c.retries.schedule(e.ExecID, e.JobID, e.Attempt, e.At)
		case execution.CancelRetry:
			c.retries.cancel(e.ExecID)
		case execution.WaitForAgent:
			c.place.NoteWaiting(e.ExecID, e.JobID)
			group := ""
			if job != nil {
				group = job.Target.Group
			}
			c.log.Warn("execution waits for an agent of its group", "exec", e.ExecID, "job", e.JobID, "group", group)
		case execution.ForgetWaiting:
			c.place.ForgetWaiting(e.ExecID)
		case execution.SendRun:
			j := job
			if j == nil {
				cj, _, ok := c.jobs.Get(rec.JobID)
				if !ok {
					return futs, evErr, fmt.Errorf("send run %s: job %s: %w", rec.ExecID, rec.JobID, ErrNotFound)
				}
				j = &cj
			}
			if err := c.sendRun(ctx, *j, rec, e.Attempt, e.RunAt); err != nil {
				if e.Resend {
					return futs, evErr, fmt.Errorf("re-send run %s: %w", rec.ExecID, err)
				}
				return futs, evErr, fmt.Errorf("send run %s: %w", rec.ExecID, err)
			}
		case execution.SendCancel:
			cmd := protocol.Command{Kind: protocol.CmdCancel, Agent: e.Agent, Cancel: &protocol.Cancel{ExecID: e.ExecID, Reason: e.Reason}}
			if err := c.publishCommand(ctx, cmd, protocol.CancelMsgID(e.ExecID, e.Attempt)); err != nil {
				return futs, evErr, fmt.Errorf("send cancel %s: %w", e.ExecID, err)
			}
		case execution.Retire:
			// Done by the caller, which holds the revision read (the
			// retention's retireExec, controller/retention).
		}
	}
	return futs, evErr, nil
}

// execEffects is startEffects that then waits (awaitEvents) until the
// events are stored, so that the history index can show the change to a
// list made after the caller's write returned.
func (c *execService) execEffects(ctx context.Context, rec *execRecord, job *protocol.Job, effs []execution.Effect) error {
	futs, _, err := c.startEffects(ctx, rec, job, effs)
	c.awaitEvents(ctx, futs)
	return err
}

// awaitEvents waits at most eventAckWait for the events futs to be
// stored. An event that failed fails the write op ctx carries; those not
// answered by then keep the op open until they are (holdLate).
func (c *execService) awaitEvents(ctx context.Context, futs []jetstream.PubAckFuture) {
	if len(futs) == 0 {
		return
	}
	op := writemark.From(ctx)
	t := time.NewTimer(c.cfg.eventAckWait)
	defer t.Stop()
	for i, f := range futs {
		select {
		case <-f.Ok():
		case <-f.Err():
			op.Fail()
		case <-t.C:
			c.holdLate(op, futs[i:])
			return
		}
	}
}

// eventAckWait bounds how long execEffects waits for its events' acks.
const eventAckWait = 2 * time.Second
