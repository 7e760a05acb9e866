package scheduler

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// applier applies commands on the caller's goroutine (the link's
// consumer): each kind has its applier, which writes the command's effect
// and the cursor in one transaction and, once durable, posts the typed
// message the scheduler goroutine handles. It never waits for the
// scheduler.
type applier struct {
	env      *env
	refusing *atomic.Bool // the trigger refuses to fire (clock skew)
}

// command is one command being applied: its sequence, when it was
// received, and what to call when its write finished.
type command struct {
	seq  uint64
	recv time.Time
	done func(error)
}

// setCursor advances the command cursor in tx, written once per group
// commit (the last command of a batch wins).
func (c command) setCursor(tx *store.Tx) error {
	tx.SetMetaAtCommit(store.MetaCursor, strconv.FormatUint(c.seq, 10))
	return nil
}

// apply applies command seq of AX_CMD idempotently, advancing the cursor
// in the same transaction. A malformed command is logged with its reason
// and skipped (the cursor advances). done, if set, is called when the
// transaction is durable (or failed).
func (a *applier) apply(seq uint64, data []byte, done func(error)) {
	c := command{seq: seq, recv: a.env.now(), done: done}
	cmd, err := protocol.DecodeCommand(data)
	if err != nil {
		a.skip(c, err, len(data))
		return
	}
	if cmd.Agent != a.env.cfg.AgentID {
		a.skip(c, fmt.Errorf("agent: command is for %q, this agent is %q", cmd.Agent, a.env.cfg.AgentID), len(data))
		return
	}
	switch cmd.Kind {
	case protocol.CmdAssign:
		err = a.assign(c, cmd.Assign)
	case protocol.CmdUnassign:
		a.unassign(c, cmd.Unassign)
	case protocol.CmdRun:
		err = a.run(c, cmd.Run)
	case protocol.CmdCancel:
		a.cancel(c, cmd.Cancel)
	case protocol.CmdLeaseGrant:
		a.leaseGrant(c, cmd.Lease)
	case protocol.CmdLeaseRevoke:
		a.leaseRevoke(c, cmd.Lease)
	default:
		err = fmt.Errorf("kind: unknown command kind %q", cmd.Kind)
	}
	if err != nil {
		a.skip(c, err, len(data))
	}
}

// submit writes fn and, once it is durable, posts the message then
// returns, if any, to the scheduler (then runs after the write: the
// message may hold what the write found).
func (a *applier) submit(c command, fn func(*store.Tx) error, then func() message) {
	a.submitOr(c, fn, then, nil)
}

// submitOr is submit, and posts the message failed returns, if any, when
// the write failed.
func (a *applier) submitOr(c command, fn func(*store.Tx) error, then, failed func() message) {
	a.env.cfg.Store.Submit(fn, func(err error) {
		next := then
		if err != nil {
			a.env.cfg.Log.Error("apply command", "seq", c.seq, "err", err)
			next = failed
		}
		if next != nil {
			if m := next(); m != nil {
				a.env.mail.post(m)
			}
		}
		if c.done != nil {
			c.done(err)
		}
	})
}

// skip logs a malformed command and advances the cursor past it.
func (a *applier) skip(c command, reason error, size int) {
	a.env.cfg.Log.Warn("malformed command skipped", "seq", c.seq, "reason", reason.Error(), "bytes", size)
	a.submit(c, c.setCursor, nil)
}

// assign stores a periodic job (a newer generation replaces it).
func (a *applier) assign(c command, as *protocol.Assign) error {
	job := as.Job.WithDefaults()
	sc, err := schedule.Parse(job.Schedule, job.CreatedAt)
	if err != nil {
		return err
	}
	if !sc.Periodic() {
		return fmt.Errorf("assign.job.schedule: %s is one-shot; one-shot jobs arrive as run commands", job.Schedule.Kind())
	}
	spec, err := json.Marshal(job)
	if err != nil {
		return err
	}
	row := store.Job{ID: job.ID, Generation: job.Generation, Spec: spec, ShardIndex: -1, Epoch: as.Epoch}
	if as.Shard != nil {
		row.ShardIndex, row.ShardTotal = as.Shard.Index, as.Shard.Total
	}
	var written bool
	a.submit(c, func(tx *store.Tx) error {
		var err error
		var lf time.Time
		row.Ref, lf, written, err = tx.PutJob(row)
		if err != nil {
			return err
		}
		if written {
			row.LastFire = lf
			if lf.IsZero() {
				// Fires from now on; a restart catches up from here.
				row.LastFire = c.recv.Round(0)
				if err := tx.SetLastFire(row.Ref, row.LastFire); err != nil {
					return err
				}
			}
		}
		return c.setCursor(tx)
	}, func() message {
		if !written {
			return nil
		}
		return jobAssigned{row: row}
	})
	return nil
}

// unassign deletes a job (of that generation or older).
func (a *applier) unassign(c command, u *protocol.Unassign) {
	a.submit(c, func(tx *store.Tx) error {
		if _, err := tx.DeleteJob(u.JobID, u.Generation, c.recv); err != nil {
			return err
		}
		return c.setCursor(tx)
	}, func() message { return jobUnassigned{id: u.JobID} })
}

// run stores an attempt of a run command: PENDING on its wheel, or, when
// it is due already (asap, manual trigger, a retry whose time has come),
// TRIGGERED at once with its triggered report: one write instead of
// PENDING, then TRIGGERED. A due run of a one-shot job that takes a free
// worker's slot is stored RUNNING with its running report instead and
// goes to that worker (directstart.go). A run under a group lease (epoch
// > 0) always goes through the wheel, where it fires only while the lease
// is held (fenceRun).
func (a *applier) run(c command, r *protocol.Run) error {
	job := r.Job.WithDefaults()
	spec, err := json.Marshal(job)
	if err != nil {
		return err
	}
	e := store.Exec{ExecID: r.ExecID, Attempt: r.Attempt, JobID: job.ID, State: store.StatePending, Priority: job.Priority,
		Fine: b2i(job.Precision == protocol.PrecisionFine), Concurrency: job.Concurrency, ScheduledAt: r.RunAt.UTC(),
		RunAt: r.RunAt.UTC(), Epoch: r.Epoch, ShardIndex: -1, Spec: spec}
	if _, sched, err := protocol.ParseExecID("exec_id", r.ExecID); err == nil {
		e.ScheduledAt = sched
	}
	due := !e.RunAt.After(c.recv) && !a.refusing.Load() && r.Epoch == 0
	var rep Report
	started := false
	if due {
		e.State, e.TriggeredAt = store.StateTriggered, c.recv.Round(0)
		rr := rowReport(e, protocol.ReportTriggered)
		if started = !job.Periodic() && a.env.slots.take(); started {
			e.State, e.StartedAt = store.StateRunning, c.recv.Round(0)
			rr = a.env.runningReport(&item{row: &e, started: c.recv})
		}
		if rep, err = a.env.host.EncodeReport(rr); err != nil {
			if started {
				a.env.mail.post(slotBack{})
			}
			return err
		}
		rep.Hold = true // a run the controller sent: its record exists
	}
	var inserted bool
	a.submitOr(c, func(tx *store.Tx) error {
		var err error
		if e.ID, inserted, err = tx.InsertExec(e); err != nil {
			return err
		}
		if inserted && due {
			if err := rep.Enqueue(tx); err != nil {
				return err
			}
		}
		return c.setCursor(tx)
	}, func() message {
		if !inserted {
			if started {
				return slotBack{}
			}
			return nil
		}
		if due {
			a.env.host.KickOutbox()
		}
		spec := specOf(job)
		return runStored{e: e, due: due, spec: &spec, started: started}
	}, func() message {
		if started {
			return slotBack{}
		}
		return nil
	})
	return nil
}

// cancel finishes a live attempt that is not running as cancelled, with
// its finished report; the scheduler then drops it from the queue or
// cancels the running handler.
func (a *applier) cancel(c command, cc *protocol.Cancel) {
	var rowID int64
	a.submit(c, func(tx *store.Tx) error {
		rowID = 0
		e, ok, err := tx.LiveAttempt(cc.ExecID)
		if err != nil {
			return err
		}
		if ok {
			rowID = e.ID
			if e.State != store.StateRunning {
				res := retry.Result{Code: -1, Message: "cancelled before it ran"}
				if cc.Reason != "" {
					res.Message += ": " + cc.Reason
				}
				rj, _ := json.Marshal(res)
				if _, err := tx.Finish(e.ID, store.StateFinished, c.recv.Round(0), string(retry.OutcomeCancelled), rj); err != nil {
					return err
				}
				r := rowReport(e, protocol.ReportFinished)
				r.Outcome, r.Result = retry.OutcomeCancelled, &res
				if err := a.env.enqueue(tx, r); err != nil {
					return err
				}
			}
		}
		return c.setCursor(tx)
	}, func() message {
		a.env.host.KickOutbox()
		if rowID == 0 {
			return nil
		}
		return attemptCancelled{rowID: rowID}
	})
}

// leaseGrant stores a group job's new lease epoch (not valid until a
// heartbeat reply renews it).
func (a *applier) leaseGrant(c command, l *protocol.Lease) {
	a.submit(c, func(tx *store.Tx) error {
		if _, err := tx.SetEpoch(l.JobID, l.Epoch, time.Time{}); err != nil {
			return err
		}
		return c.setCursor(tx)
	}, func() message { return leaseEpochSet{jobID: l.JobID, epoch: l.Epoch} })
}

// leaseRevoke stops a group job (the controller moved its lease); only
// the cursor is written.
func (a *applier) leaseRevoke(c command, l *protocol.Lease) {
	a.submit(c, c.setCursor, func() message { return leaseLost{jobID: l.JobID, epoch: l.Epoch} })
}
