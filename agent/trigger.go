package agent

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
func (s *scheduler) schedNow() time.Time {
	now := s.a.clk.Now().Round(0)
	if s.adopt {
		now = now.Add(time.Duration(s.a.offset.Load()))
	}
	return now
}

// deadline converts a wall time into a wheel deadline on the monotonic clock.
func (s *scheduler) deadline(at time.Time) time.Time {
	now := s.a.clk.Now()
	return now.Add(at.Sub(s.schedNow()))
}

func (s *scheduler) lane(fine bool) *wheel.Driver[wheelItem] {
	if fine {
		return s.fine
	}
	return s.normal
}

// planNext puts the job's next fire after `after` on its wheel.
func (s *scheduler) planNext(j *jobRef, after time.Time) {
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
	s.lane(aj.job.Precision == protocol.PrecisionFine).Add(s.deadline(next),
		wheelItem{id: aj.ref, seq: uint32(aj.planSeq), prio: uint8(aj.job.Priority)})
}

// replan runs the misfire policy for a job (start, clock jump, skew or
// lease regained) and plans its next fire.
func (s *scheduler) replan(j *jobRef, misfire bool) {
	aj := j.assigned
	if aj == nil {
		return
	}
	now := s.schedNow()
	from := aj.lastFire
	if from.IsZero() || from.After(now) {
		from = now
	}
	if misfire && j.fireable() && s.canFire(j) {
		plan := schedule.Plan(aj.sched, aj.job.Misfire.Misfire(), from, now)
		if plan.Missed > 0 {
			s.recordMissed(j, plan)
		}
		for _, t := range plan.Run {
			s.fireJob(j, t)
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
	s.planNext(j, from)
}

func (s *scheduler) replanAll(misfire bool) {
	ids := make([]string, 0, len(s.jobs))
	for id, j := range s.jobs {
		if j.assigned != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.replan(s.jobs[id], misfire)
	}
}

// canFire checks skew and lease.
func (s *scheduler) canFire(j *jobRef) bool {
	if s.skewRefusing {
		return false
	}
	if aj := j.assigned; aj != nil && aj.epoch > 0 {
		return !aj.leaseUntil.IsZero() && s.a.clk.Now().Before(aj.leaseUntil)
	}
	return true
}

// fire handles a wheel item.
func (s *scheduler) fire(w wheelItem) {
	if s.stopped {
		return
	}
	if !w.periodic() {
		s.pending--
		if f, ok := s.fenced[w.id]; ok && !s.fenceRun(w, f) {
			return
		}
		if s.skewRefusing {
			s.held = append(s.held, w)
			s.log.Warn("clock skew over clock.max_skew: holding run", "exec_row", w.id, "offset", time.Duration(s.a.offset.Load()))
			return
		}
		s.fireRun(w)
		return
	}
	j := s.byRef[w.id]
	if j == nil || j.assigned == nil || w.seq != uint32(j.assigned.planSeq) {
		return // stale: unassigned or re-planned
	}
	aj := j.assigned
	if early := aj.next.Sub(s.schedNow()); early > 0 {
		// The wheel runs on the monotonic clock and the schedule on the
		// wall clock, which may have run slower since the fire was
		// planned (NTP slewing, an adopted offset): never fire before
		// the scheduled wall time, wait for the rest on the wheel.
		s.lane(aj.job.Precision == protocol.PrecisionFine).Add(s.a.clk.Now().Add(early), w)
		return
	}
	at := aj.next
	s.planNext(j, at)
	if !j.fireable() {
		return
	}
	if s.skewRefusing {
		s.log.Warn("clock skew over clock.max_skew: refusing to fire", "job_id", j.id, "scheduled_at", at,
			"offset", time.Duration(s.a.offset.Load()))
		return
	}
	if !s.canFire(j) {
		if !aj.leaseUntil.IsZero() && !aj.lapseSaid {
			aj.lapseSaid = true
			s.log.Warn("group lease lapsed (not renewed by a heartbeat reply): not firing", "job_id", j.id,
				"epoch", aj.epoch, "lease_until", aj.leaseUntil)
		}
		s.log.Debug("no valid lease: not firing", "job_id", j.id, "epoch", aj.epoch)
		return
	}
	s.fireJob(j, at)
}

// fenceRun decides a run fired under a group lease (a retry sent to this
// agent as the job's holder): it fires while the agent holds the lease at
// the run's epoch; it waits (checked again every leaseRunRecheck) while
// the lease is not valid yet at that epoch; it is dropped unrun and
// reported fenced once the job moved on (unassigned, or a newer epoch
// here): the controller counts that attempt as lost and sends the next one
// to the job's holder (dropFenced).
func (s *scheduler) fenceRun(w wheelItem, f runFence) bool {
	j := s.jobs[f.jobID]
	switch {
	case j == nil || j.assigned == nil || j.assigned.epoch > f.epoch:
		delete(s.fenced, w.id)
		s.dropFenced(w.id, fencedWhy(j), nil)
		return false
	case !s.canFire(j):
		s.pending++
		s.lane(false).Add(s.deadline(s.schedNow().Add(leaseRunRecheck)), w)
		return false
	}
	delete(s.fenced, w.id)
	return true
}

// leaseRunRecheck is how often a run waiting for its group lease looks again.
const leaseRunRecheck = 250 * time.Millisecond

// fireJob records one periodic fire: TRIGGERED (or SKIPPED by overlap),
// written with the other fires of the same pass (queueFire).
func (s *scheduler) fireJob(j *jobRef, at time.Time) {
	aj := j.assigned
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit && s.a.cfg.Outbox.CoalesceSkipped {
		// Counted only (skips.go): the cheap path under overload.
		aj.lastFire = at
		s.skipFire(j, at)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("fire skipped: previous still active (overlap forbid)", "job_id", j.id, "run_at", at)
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
	now := s.a.clk.Now().Round(0)
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit {
		rep, err := s.a.encodeReport(protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
			ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "overlap"})
		if err != nil {
			s.log.Error("record skipped fire", "exec_id", execID, "err", err)
			return
		}
		// Its own write, not the pass's batch: one function per skipped
		// fire keeps the store's queue as the brake on fires under
		// overload (Submit blocks when it is full), as before batching.
		row := store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
			Periodic: true, Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
			ShardIndex: si, ShardTotal: st, FinishedAt: now, Outcome: "skipped"}
		s.a.st.Submit(func(tx *store.Tx) error {
			_, ins, err := tx.InsertExec(row)
			if err != nil || !ins {
				return err
			}
			if err := tx.SetLastFire(ref, at); err != nil {
				return err
			}
			return rep.enqueue(tx)
		}, func(err error) {
			if err != nil {
				s.post(func() { s.log.Error("record skipped fire", "exec_id", execID, "err", err) })
			}
		})
		s.log.Debug("fire skipped: previous still active (overlap forbid)", "job_id", j.id, "exec_id", execID, "run_at", at)
		return
	}
	s.flushSkip(j) // the skipped fires before this one are written first
	row := &store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateTriggered, Periodic: true,
		Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
		ShardIndex: si, ShardTotal: st, TriggeredAt: now}
	rep, err := s.a.encodeReport(rowReport(*row, protocol.ReportTriggered))
	if err != nil {
		s.log.Error("record trigger", "job_id", j.id, "exec_id", execID, "err", err)
		return
	}
	j.active++
	s.queueFire(&fireRec{j: j, ref: ref, row: row, rep: rep})
}

// fireRun triggers a run command's attempt whose run_at has come.
func (s *scheduler) fireRun(w wheelItem) {
	now := s.a.clk.Now().Round(0)
	due := s.schedNow()
	var row store.Exec
	var ok bool
	s.a.st.Submit(func(tx *store.Tx) error {
		var err error
		if row, ok, err = tx.Trigger(w.id, now, due); err != nil || !ok {
			return err
		}
		rep, err := s.a.encodeReport(rowReport(row, protocol.ReportTriggered))
		if err != nil {
			return err
		}
		return rep.enqueue(tx)
	}, func(err error) {
		if err == nil && ok {
			s.a.kickOutbox()
		}
		s.post(func() {
			if err == nil && !ok && row.State == store.StatePending {
				// Due on the monotonic wheel before the wall clock: wait
				// for the rest.
				s.pending++
				s.lane(false).Add(s.deadline(row.ScheduledAt), w)
				return
			}
			if err != nil || !ok {
				if err != nil {
					s.log.Error("record trigger", "exec_row", w.id, "err", err)
				}
				return
			}
			j := s.job(row.JobID)
			if j.assigned == nil && row.Concurrency > 0 {
				j.limit = row.Concurrency
			}
			j.active++
			s.triggered(j, &row, true, nil)
		})
	})
}

// rowReport starts a report about an attempt row. Reports after the
// triggered one carry the times of the steps before them (TriggeredAt,
// StartedAt), so that the flusher may send only the latest of an attempt's
// reports still in the outbox.
func rowReport(e store.Exec, kind protocol.ReportKind) protocol.Report {
	r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: kind, ScheduledAt: e.ScheduledAt, Epoch: e.Epoch}
	if kind != protocol.ReportTriggered && kind != protocol.ReportSkipped {
		r.TriggeredAt = e.TriggeredAt
		if kind != protocol.ReportRunning {
			r.StartedAt = e.StartedAt
		}
	}
	if e.ShardTotal > 0 {
		r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
	}
	return r
}

// triggered runs when a TRIGGERED row is durable (j.active counts it).
func (s *scheduler) triggered(j *jobRef, row *store.Exec, ok bool, err error) {
	if err != nil || !ok {
		j.active--
		if err != nil {
			s.log.Error("record trigger", "job_id", j.id, "exec_id", row.ExecID, "err", err)
		}
		s.gc(j)
		return
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("submitted", "job_id", j.id, "exec_id", row.ExecID, "exec_row", row.ID, "run_at", row.RunAt, "priority", row.Priority)
	}
	// Spilled (left in SQLite) or not, it stays counted in j.active.
	s.accept(&item{id: row.ID, job: j, prio: uint8(row.Priority), runAt: row.ScheduledAt, row: row})
}
