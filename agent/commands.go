package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// applyCommand applies command seq of AX_CMD idempotently, advancing the
// cursor in the same transaction. A malformed command is logged with its
// reason and skipped (the cursor advances). done, if set, is called when the
// transaction is durable (or failed). It never blocks on the scheduler.
func (a *Agent) applyCommand(seq uint64, data []byte, done func(error)) {
	recv := a.clk.Now()
	cursor := strconv.FormatUint(seq, 10)
	// Written once per group commit (the last command of a batch wins).
	setCursor := func(tx *store.Tx) error { tx.SetMetaAtCommit(store.MetaCursor, cursor); return nil }
	finish := func(after func()) func(error) {
		return func(err error) {
			if err != nil {
				a.log.Error("apply command", "seq", seq, "err", err)
			} else if after != nil {
				a.sched.post(after)
			}
			if done != nil {
				done(err)
			}
		}
	}
	skip := func(reason error) {
		a.log.Warn("malformed command skipped", "seq", seq, "reason", reason.Error(), "bytes", len(data))
		a.st.Submit(setCursor, finish(nil))
	}
	cmd, err := protocol.DecodeCommand(data)
	if err != nil {
		skip(err)
		return
	}
	if cmd.Agent != a.cfg.ID {
		skip(fmt.Errorf("agent: command is for %q, this agent is %q", cmd.Agent, a.cfg.ID))
		return
	}
	switch cmd.Kind {
	case protocol.CmdAssign:
		as := cmd.Assign
		job := as.Job.WithDefaults()
		sc, err := schedule.Parse(job.Schedule, job.CreatedAt)
		if err != nil {
			skip(err)
			return
		}
		if !sc.Periodic() {
			skip(fmt.Errorf("assign.job.schedule: %s is one-shot; one-shot jobs arrive as run commands", job.Schedule.Kind()))
			return
		}
		spec, err := json.Marshal(job)
		if err != nil {
			skip(err)
			return
		}
		row := store.Job{ID: job.ID, Generation: job.Generation, Spec: spec, ShardIndex: -1, Epoch: as.Epoch}
		if as.Shard != nil {
			row.ShardIndex, row.ShardTotal = as.Shard.Index, as.Shard.Total
		}
		var written bool
		a.st.Submit(func(tx *store.Tx) error {
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
					row.LastFire = recv.Round(0)
					if err := tx.SetLastFire(row.Ref, row.LastFire); err != nil {
						return err
					}
				}
			}
			return setCursor(tx)
		}, finish(func() {
			if written {
				a.sched.assigned(row)
			}
		}))
	case protocol.CmdUnassign:
		u := cmd.Unassign
		a.st.Submit(func(tx *store.Tx) error {
			if _, err := tx.DeleteJob(u.JobID, u.Generation); err != nil {
				return err
			}
			return setCursor(tx)
		}, finish(func() { a.sched.unassigned(u.JobID) }))
	case protocol.CmdRun:
		r := cmd.Run
		job := r.Job.WithDefaults()
		spec, err := json.Marshal(job)
		if err != nil {
			skip(err)
			return
		}
		e := store.Exec{ExecID: r.ExecID, Attempt: r.Attempt, JobID: job.ID, State: store.StatePending, Priority: job.Priority,
			Fine: b2i(job.Precision == protocol.PrecisionFine), Concurrency: job.Concurrency, ScheduledAt: r.RunAt.UTC(),
			RunAt: r.RunAt.UTC(), Epoch: r.Epoch, ShardIndex: -1, Spec: spec}
		if _, sched, err := protocol.ParseExecID("exec_id", r.ExecID); err == nil {
			e.ScheduledAt = sched
		}
		// A run that is due already (asap, manual trigger, a retry whose
		// time has come) is stored TRIGGERED at once, with its triggered
		// report: one write instead of PENDING, then TRIGGERED.
		// A run under a group lease (epoch > 0) always goes through the
		// wheel, where it fires only while the lease is held (fenceRun).
		due := !e.RunAt.After(recv) && !a.sched.refusing.Load() && r.Epoch == 0
		var rep encodedReport
		if due {
			e.State, e.TriggeredAt = store.StateTriggered, recv.Round(0)
			if rep, err = a.encodeReport(rowReport(e, protocol.ReportTriggered)); err != nil {
				skip(err)
				return
			}
		}
		var inserted bool
		a.st.Submit(func(tx *store.Tx) error {
			var err error
			if e.ID, inserted, err = tx.InsertExec(e); err != nil {
				return err
			}
			if inserted && due {
				if err := rep.enqueue(tx); err != nil {
					return err
				}
			}
			return setCursor(tx)
		}, finish(func() {
			if !inserted {
				return
			}
			if due {
				a.kickOutbox()
				a.sched.runDue(e)
				return
			}
			e.Spec = nil
			a.sched.planRun(e)
		}))
	case protocol.CmdCancel:
		c := cmd.Cancel
		var rowID int64
		a.st.Submit(func(tx *store.Tx) error {
			rowID = 0
			e, ok, err := tx.LiveAttempt(c.ExecID)
			if err != nil {
				return err
			}
			if ok {
				rowID = e.ID
				if e.State != store.StateRunning {
					res := retry.Result{Code: -1, Message: "cancelled before it ran"}
					if c.Reason != "" {
						res.Message += ": " + c.Reason
					}
					rj, _ := json.Marshal(res)
					if _, err := tx.Finish(e.ID, store.StateFinished, recv.Round(0), string(retry.OutcomeCancelled), rj); err != nil {
						return err
					}
					r := rowReport(e, protocol.ReportFinished)
					r.Outcome, r.Result = retry.OutcomeCancelled, &res
					if err := a.enqueue(tx, r); err != nil {
						return err
					}
				}
			}
			return setCursor(tx)
		}, finish(func() {
			a.kickOutbox()
			if rowID != 0 {
				a.sched.cancelled(rowID)
			}
		}))
	case protocol.CmdLeaseGrant:
		l := cmd.Lease
		a.st.Submit(func(tx *store.Tx) error {
			if _, err := tx.SetEpoch(l.JobID, l.Epoch, time.Time{}); err != nil {
				return err
			}
			return setCursor(tx)
		}, finish(func() { a.sched.leaseEpoch(l.JobID, l.Epoch) }))
	case protocol.CmdLeaseRevoke:
		l := cmd.Lease
		a.st.Submit(setCursor, finish(func() { a.sched.leaseRevoked(l.JobID, l.Epoch) }))
	default:
		skip(fmt.Errorf("kind: unknown command kind %q", cmd.Kind))
	}
}
