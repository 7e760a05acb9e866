package scheduler

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
	"github.com/axsched/ax/pkg/wheel"
)

// schedNow is the wall time schedules are evaluated at: the agent's clock,
// or the controller's when adopting its time.
func (t *trigger) schedNow() time.Time {
	now := t.env.now().Round(0)
	if t.adopt {
		now = now.Add(t.env.host.ClockOffset())
	}
	return now
}

// deadline converts a wall time into a wheel deadline on the monotonic clock.
func (t *trigger) deadline(at time.Time) time.Time {
	now := t.env.now()
	return now.Add(at.Sub(t.schedNow()))
}

func (t *trigger) lane(fine bool) *wheel.Driver[wheelItem] {
	if fine {
		return t.fine
	}
	return t.normal
}

// planNext puts the job's next fire after `after` on its wheel.
func (t *trigger) planNext(j *jobRef, after time.Time) {
	aj := j.assigned
	aj.planSeq++
	if uint32(aj.planSeq) == 0 {
		aj.planSeq++ // 0 marks a run item on the wheel
	}
	if !j.fireable() {
		return
	}
	next, ok := aj.sched.Next(after)
	if !ok {
		return
	}
	aj.next = next
	t.lane(aj.job.Precision == protocol.PrecisionFine).Add(t.deadline(next),
		wheelItem{id: aj.ref, seq: uint32(aj.planSeq), prio: uint8(aj.job.Priority)})
}

// replan runs the misfire policy for a job (start, clock jump, skew or
// lease regained) and plans its next fire.
func (t *trigger) replan(j *jobRef, misfire bool) {
	aj := j.assigned
	if aj == nil {
		return
	}
	now := t.schedNow()
	from := aj.lastFire
	if from.IsZero() || from.After(now) {
		from = now
	}
	if misfire && j.fireable() && t.canFire(j) {
		plan := schedule.Plan(aj.sched, aj.job.Misfire.Misfire(), from, now)
		if plan.Missed > 0 {
			t.recordMissed(j, plan)
		}
		for _, at := range plan.Run {
			t.fireJob(j, at)
		}
		if len(plan.Run) > 0 {
			from = plan.Run[len(plan.Run)-1]
		} else if plan.Missed > 0 {
			from = plan.LastMissed
		}
	}
	if from.Before(now) && !misfire {
		from = now
	}
	if from.Before(now) {
		from = now
	}
	t.planNext(j, from)
}

func (t *trigger) replanAll(misfire bool) {
	ids := make([]string, 0, len(t.jobs.byID))
	for id, j := range t.jobs.byID {
		if j.assigned != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		t.replan(t.jobs.byID[id], misfire)
	}
}

// canFire checks skew and lease.
func (t *trigger) canFire(j *jobRef) bool {
	if t.skewRefusing {
		return false
	}
	if aj := j.assigned; aj != nil && aj.epoch > 0 {
		return !aj.leaseUntil.IsZero() && t.env.now().Before(aj.leaseUntil)
	}
	return true
}

// fire handles a wheel item.
func (t *trigger) fire(w wheelItem) {
	if t.stopped {
		return
	}
	if !w.periodic() {
		t.pending--
		if f, ok := t.runs.fenced[w.id]; ok && !t.fenceRun(w, f) {
			return
		}
		if t.skewRefusing {
			t.held = append(t.held, w)
			t.env.cfg.Log.Warn("clock skew over clock.max_skew: holding run", "exec_row", w.id, "offset", t.env.host.ClockOffset())
			return
		}
		t.fireRun(w)
		return
	}
	j := t.jobs.byRef[w.id]
	if j == nil || j.assigned == nil || w.seq != uint32(j.assigned.planSeq) {
		return // stale: unassigned or re-planned
	}
	aj := j.assigned
	if early := aj.next.Sub(t.schedNow()); early > 0 {
		// The wheel runs on the monotonic clock and the schedule on the
		// wall clock, which may have run slower since the fire was
		// planned (NTP slewing, an adopted offset): never fire before
		// the scheduled wall time, wait for the rest on the wheel.
		t.lane(aj.job.Precision == protocol.PrecisionFine).Add(t.env.now().Add(early), w)
		return
	}
	at := aj.next
	t.planNext(j, at)
	if !j.fireable() {
		return
	}
	if t.skewRefusing {
		t.env.cfg.Log.Warn("clock skew over clock.max_skew: refusing to fire", "job_id", j.id, "scheduled_at", at,
			"offset", t.env.host.ClockOffset())
		return
	}
	if !t.canFire(j) {
		if !aj.leaseUntil.IsZero() && !aj.lapseSaid {
			aj.lapseSaid = true
			t.env.cfg.Log.Warn("group lease lapsed (not renewed by a heartbeat reply): not firing", "job_id", j.id,
				"epoch", aj.epoch, "lease_until", aj.leaseUntil)
		}
		t.env.cfg.Log.Debug("no valid lease: not firing", "job_id", j.id, "epoch", aj.epoch)
		return
	}
	t.fireJob(j, at)
}

// fenceRun decides a run fired under a group lease (a retry sent to this
// agent as the job's holder): it fires while the agent holds the lease at
// the run's epoch; it waits (checked again every leaseRunRecheck) while
// the lease is not valid yet at that epoch; it is dropped unrun and
// reported fenced once the job moved on (unassigned, or a newer epoch
// here): the controller counts that attempt as lost and sends the next one
// to the job's holder (dropFenced).
func (t *trigger) fenceRun(w wheelItem, f runFence) bool {
	j := t.jobs.byID[f.jobID]
	switch {
	case j == nil || j.assigned == nil || j.assigned.epoch > f.epoch:
		delete(t.runs.fenced, w.id)
		t.runs.dropFenced(w.id, fencedWhy(j), nil)
		return false
	case !t.canFire(j):
		t.pending++
		t.lane(false).Add(t.deadline(t.schedNow().Add(leaseRunRecheck)), w)
		return false
	}
	delete(t.runs.fenced, w.id)
	return true
}

// leaseRunRecheck is how often a run waiting for its group lease looks again.
const leaseRunRecheck = 250 * time.Millisecond

// fireJob records one periodic fire: TRIGGERED (or SKIPPED by overlap),
// written with the other fires of the same pass (queueFire).
func (t *trigger) fireJob(j *jobRef, at time.Time) {
	aj := j.assigned
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit && t.env.cfg.CoalesceSkipped {
		// Counted only (skips.go): the cheap path under overload.
		aj.lastFire = at
		t.skipFire(j, at)
		if t.env.cfg.Log.Enabled(context.Background(), slog.LevelDebug) {
			t.env.cfg.Log.Debug("fire skipped: previous still active (overlap forbid)", "job_id", j.id, "run_at", at)
		}
		return
	}
	execID := protocol.ExecID(j.id, at)
	if aj.shard != nil {
		execID = protocol.BroadcastExecID(j.id, at, aj.shard.Index)
	}
	aj.lastFire = at
	ref, epoch, shard := aj.ref, aj.epoch, aj.shard
	prio, fine := aj.job.Priority, aj.job.Precision == protocol.PrecisionFine
	si, st := -1, 0
	if shard != nil {
		si, st = shard.Index, shard.Total
	}
	now := t.env.now().Round(0)
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit {
		rep, err := t.env.host.EncodeReport(protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
			ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "overlap"})
		if err != nil {
			t.env.cfg.Log.Error("record skipped fire", "exec_id", execID, "err", err)
			return
		}
		// Its own write, not the pass's batch: one function per skipped
		// fire keeps the store's queue as the brake on fires under
		// overload (Submit blocks when it is full), as before batching.
		row := store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
			Periodic: true, Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
			ShardIndex: si, ShardTotal: st, FinishedAt: now, Outcome: "skipped"}
		t.env.cfg.Store.Submit(func(tx *store.Tx) error {
			_, ins, err := tx.InsertExec(row)
			if err != nil || !ins {
				return err
			}
			if err := tx.SetLastFire(ref, at); err != nil {
				return err
			}
			return rep.Enqueue(tx)
		}, func(err error) {
			if err != nil {
				t.env.cfg.Log.Error("record skipped fire", "exec_id", execID, "err", err)
			}
		})
		t.env.cfg.Log.Debug("fire skipped: previous still active (overlap forbid)", "job_id", j.id, "exec_id", execID, "run_at", at)
		return
	}
	held := t.holdSkips(j) // the skipped fires before this one
	row := &store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateTriggered, Periodic: true,
		Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
		ShardIndex: si, ShardTotal: st, TriggeredAt: now}
	rep, err := t.env.host.EncodeReport(rowReport(*row, protocol.ReportTriggered))
	if err != nil {
		t.env.cfg.Log.Error("record trigger", "job_id", j.id, "exec_id", execID, "err", err)
		return
	}
	// Held for the fire's later steps (it makes its record at the
	// controller, in whatever state its first report brings), except under
	// a group lease: the lease and its moves follow the triggered reports.
	rep.Hold = epoch == 0
	j.active++
	t.queueFire(&fireRec{j: j, ref: ref, row: row, rep: rep, held: held})
}

// fireRun triggers a run command's attempt whose run_at has come.
func (t *trigger) fireRun(w wheelItem) {
	now := t.env.now().Round(0)
	due := t.schedNow()
	var row store.Exec
	var ok bool
	t.env.cfg.Store.Submit(func(tx *store.Tx) error {
		var err error
		if row, ok, err = tx.Trigger(w.id, now, due); err != nil || !ok {
			return err
		}
		rep, err := t.env.host.EncodeReport(rowReport(row, protocol.ReportTriggered))
		if err != nil {
			return err
		}
		// A run the controller sent: its record exists. Not a run under a
		// group lease (epoch > 0): the lease and its moves follow the
		// triggered reports, which go at once.
		rep.Hold = row.Epoch == 0
		return rep.Enqueue(tx)
	}, func(err error) {
		if err == nil && ok {
			t.env.host.KickOutbox()
		}
		t.env.mail.post(runTriggered{w: w, row: row, ok: ok, err: err})
	})
}

// runTriggered runs when fireRun's write finished.
func (t *trigger) runTriggered(m runTriggered) {
	w, row := m.w, m.row
	if m.err == nil && !m.ok && row.State == store.StatePending {
		// Due on the monotonic wheel before the wall clock: wait
		// for the rest.
		t.pending++
		t.lane(false).Add(t.deadline(row.ScheduledAt), w)
		return
	}
	if m.err != nil || !m.ok {
		if m.err != nil {
			t.env.cfg.Log.Error("record trigger", "exec_row", w.id, "err", m.err)
		}
		return
	}
	j := t.jobs.job(row.JobID)
	if j.assigned == nil && row.Concurrency > 0 {
		j.limit = row.Concurrency
	}
	j.active++
	t.runs.triggered(j, &row, nil, true, nil)
}

// planRun puts a PENDING run attempt on its wheel.
func (t *trigger) planRun(e store.Exec) {
	if e.Epoch > 0 {
		t.runs.fenced[e.ID] = runFence{jobID: e.JobID, epoch: e.Epoch}
	}
	t.pending++
	t.lane(e.Fine == 1).Add(t.deadline(e.RunAt), wheelItem{id: e.ID, prio: uint8(e.Priority)})
}
