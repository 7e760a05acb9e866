package agent

import (
	"errors"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// loadJob (re)places an assigned job from its stored row. It does not plan.
func (s *scheduler) loadJob(row store.Job) error {
	job, sc, err := decodeJobRow(row)
	if err != nil {
		return err
	}
	job.Payload = nil // stays in SQLite
	j := s.job(row.ID)
	old := j.assigned
	aj := &assignedJob{ref: row.Ref, job: job, sched: sc, epoch: row.Epoch, lastFire: row.LastFire}
	if row.ShardTotal > 0 {
		aj.shard = &protocol.ShardSlot{Index: row.ShardIndex, Total: row.ShardTotal}
	}
	if old != nil {
		aj.planSeq = old.planSeq + 1
		if old.epoch == aj.epoch {
			aj.leaseUntil = old.leaseUntil
		}
		if old.lastFire.After(aj.lastFire) {
			aj.lastFire = old.lastFire
		}
	}
	if old != nil && old.ref != aj.ref {
		delete(s.byRef, old.ref)
	}
	j.assigned = aj
	s.byRef[aj.ref] = j
	j.limit = job.Concurrency
	if job.Overlap == protocol.OverlapQueue {
		j.limit = 1
	}
	return nil
}

// assigned runs after an assign command is durable.
func (s *scheduler) assigned(row store.Job) {
	if err := s.loadJob(row); err != nil {
		s.log.Error("assigned job is invalid; not planned", "job_id", row.ID, "err", err)
		return
	}
	j := s.jobs[row.ID]
	s.log.Info("job assigned", "job_id", row.ID, "generation", row.Generation, "epoch", row.Epoch,
		"schedule", j.assigned.job.Schedule, "paused", j.assigned.job.Paused)
	s.replan(j, false)
	if row.Epoch > 0 && !s.canFire(j) {
		s.a.kickHeartbeat() // claim the lease of the new epoch now
	}
}

// unassigned runs after an unassign command is durable.
func (s *scheduler) unassigned(id string) {
	j := s.jobs[id]
	if j == nil || j.assigned == nil {
		return
	}
	s.flushSkip(j)
	delete(s.byRef, j.assigned.ref)
	j.assigned = nil
	s.log.Info("job unassigned", "job_id", id)
	s.gc(j)
}

// runFence is what a run under a group lease needs to fire: its job's
// lease at its epoch.
type runFence struct {
	jobID string
	epoch uint64
}

// Reasons of fenced reports (Report.Reason).
const (
	fencedUnassigned = "job unassigned here"
	fencedNewerEpoch = "job moved to a newer lease epoch here"
)

// fencedWhy says why an attempt under epoch is fenced for job j (nil or
// unassigned: the job left this agent).
func fencedWhy(j *jobRef) string {
	if j == nil || j.assigned == nil {
		return fencedUnassigned
	}
	return fencedNewerEpoch
}

// dropFenced finishes attempt row rowID as lease_lost without running it
// — its group job's lease moved on from the attempt's epoch — and, in the
// same transaction, puts a fenced report in the outbox: the controller
// counts the attempt as lost and sends the next one to the job's current
// holder, instead of waiting for a run that never comes. done, if set,
// runs on the scheduler goroutine afterwards.
func (s *scheduler) dropFenced(rowID int64, why string, done func()) {
	now := s.a.clk.Now().Round(0)
	var e store.Exec
	reported := false
	s.a.st.Submit(func(tx *store.Tx) error {
		reported = false
		var err error
		if e, err = tx.ExecRow(rowID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}
		ok, err := tx.Finish(rowID, store.StateFinished, now, "lease_lost", nil)
		if err != nil || !ok || e.Epoch == 0 {
			return err
		}
		r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: protocol.ReportFenced,
			ScheduledAt: e.ScheduledAt, Epoch: e.Epoch, Reason: why}
		if e.ShardTotal > 0 {
			r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
		}
		reported = true
		return s.a.enqueue(tx, r)
	}, func(err error) {
		if err == nil && reported {
			s.a.kickOutbox()
		}
		s.post(func() {
			if err != nil {
				s.log.Error("drop attempt of a lost lease", "exec_row", rowID, "err", err)
			} else if reported {
				s.log.Warn("attempt dropped unrun and reported fenced: its group lease moved on", "job_id", e.JobID,
					"exec_id", e.ExecID, "attempt", e.Attempt, "epoch", e.Epoch, "why", why)
			}
			if done != nil {
				done()
			}
		})
	})
}

// planRun puts a PENDING run attempt on its wheel.
func (s *scheduler) planRun(e store.Exec) {
	if e.Epoch > 0 {
		s.fenced[e.ID] = runFence{jobID: e.JobID, epoch: e.Epoch}
	}
	s.pending++
	s.lane(e.Fine == 1).Add(s.deadline(e.RunAt), wheelItem{id: e.ID, prio: uint8(e.Priority)})
}

// runDue takes a run attempt stored TRIGGERED by its command (it was due).
func (s *scheduler) runDue(e store.Exec) {
	j := s.job(e.JobID)
	if j.assigned == nil && e.Concurrency > 0 {
		j.limit = e.Concurrency
	}
	j.active++
	s.triggered(j, &e, true, nil)
}

// cancelled runs after a cancel command is durable: a running attempt's
// context is cancelled; a queued one leaves the queue (its row was already
// finished as cancelled in the command's transaction).
func (s *scheduler) cancelled(rowID int64) {
	if r, ok := s.running[rowID]; ok {
		r.cancel(errCancelled)
		s.log.Info("cancelling running attempt", "exec_row", rowID)
		return
	}
	delete(s.fenced, rowID)
	it, ok := s.inMem[rowID]
	if !ok {
		s.cancelledSpilled(rowID)
		return
	}
	j := it.job
	if _, ok := s.ready.remove(rowID); ok {
		j.inReady--
	} else if !removeFIFO(&j.waiting, rowID) {
		return
	}
	delete(s.inMem, rowID)
	s.mem--
	j.active--
	s.gc(j)
}

func removeFIFO(f *fifo, id int64) bool {
	var r readyQueue
	r.q[0] = *f
	r.n = f.size
	_, ok := r.remove(id)
	*f = r.q[0]
	return ok
}

// leaseGranted records a lease valid for ttl from at (monotonic).
func (s *scheduler) leaseGranted(jobID string, epoch uint64, at time.Time, ttl time.Duration) {
	j := s.jobs[jobID]
	if j == nil || j.assigned == nil {
		s.log.Warn("lease for a job not assigned here; ignored", "job_id", jobID, "epoch", epoch)
		return
	}
	aj := j.assigned
	if epoch < aj.epoch {
		s.log.Warn("stale lease epoch ignored", "job_id", jobID, "epoch", epoch, "held", aj.epoch)
		return
	}
	wasValid := s.canFire(j)
	aj.epoch = epoch
	aj.leaseUntil = at.Add(ttl)
	aj.lapseSaid = false
	if !wasValid {
		s.log.Info("lease acquired", "job_id", jobID, "epoch", epoch, "ttl", ttl)
		s.replan(j, false)
	}
}

// leaseEpoch records a lease_grant command: the job's epoch moves to epoch
// (never back), but the lease is not valid until a heartbeat reply renews
// it. A grant read from the command stream may be hours old (an agent that
// was offline); only a heartbeat reply, timed from when the heartbeat was
// sent, proves the controller still holds the lease for this agent.
func (s *scheduler) leaseEpoch(jobID string, epoch uint64) {
	j := s.jobs[jobID]
	if j == nil || j.assigned == nil || epoch <= j.assigned.epoch {
		return
	}
	j.assigned.epoch, j.assigned.leaseUntil = epoch, time.Time{}
	s.a.kickHeartbeat()
}

// leaseRevoked stops a group job at once.
func (s *scheduler) leaseRevoked(jobID string, epoch uint64) {
	j := s.jobs[jobID]
	if j == nil || j.assigned == nil || epoch < j.assigned.epoch {
		return
	}
	if j.assigned.leaseUntil.IsZero() {
		return // not held: nothing changes (a heartbeat repeats a loss)
	}
	j.assigned.leaseUntil = time.Time{}
	s.log.Info("lease revoked", "job_id", jobID, "epoch", epoch)
}

// claimedLeases lists the group jobs assigned here with an epoch, valid or
// not: a heartbeat claims them all, so the controller renews the held ones
// and grants the new ones (or answers that they are lost).
func (s *scheduler) claimedLeases() []protocol.HeldLease {
	var out []protocol.HeldLease
	for id, j := range s.jobs {
		if aj := j.assigned; aj != nil && aj.epoch > 0 {
			out = append(out, protocol.HeldLease{JobID: id, Epoch: aj.epoch})
		}
	}
	return out
}

// heldLeases lists the leases the agent believes valid.
func (s *scheduler) heldLeases() []protocol.HeldLease {
	var out []protocol.HeldLease
	now := s.a.clk.Now()
	for id, j := range s.jobs {
		if aj := j.assigned; aj != nil && aj.epoch > 0 && !aj.leaseUntil.IsZero() && now.Before(aj.leaseUntil) {
			out = append(out, protocol.HeldLease{JobID: id, Epoch: aj.epoch})
		}
	}
	return out
}

// checkSkew applies clock.max_skew to the current offset estimate.
func (s *scheduler) checkSkew() {
	off := time.Duration(s.a.offset.Load())
	over := off > s.a.cfg.Clock.MaxSkew || -off > s.a.cfg.Clock.MaxSkew
	wasRefusing, wasAdopt := s.skewRefusing, s.adopt
	switch s.a.cfg.Clock.OnSkew {
	case SkewAdopt:
		s.skewRefusing, s.adopt = false, over
	default:
		s.skewRefusing, s.adopt = over, false
	}
	s.refusing.Store(s.skewRefusing)
	if s.skewRefusing && !wasRefusing {
		s.log.Error("clock skew to the controller is over clock.max_skew: refusing to fire", "offset", off,
			"max_skew", s.a.cfg.Clock.MaxSkew)
	}
	if !s.skewRefusing && wasRefusing {
		s.log.Info("clock skew back within clock.max_skew: firing again", "offset", off)
		held := s.held
		s.held = nil
		for _, w := range held {
			s.pending++
			s.fire(w)
		}
		s.replanAll(true)
	}
	if s.adopt != wasAdopt {
		s.log.Warn("clock skew over clock.max_skew: planning on controller time", "offset", off, "adopt", s.adopt)
		s.replanAll(false)
	}
}

// stats are the heartbeat counters (without the outbox depth).
func (s *scheduler) stats() protocol.Stats {
	st := protocol.Stats{Pending: s.pending, Running: len(s.running), QueueDepth: s.mem,
		ClockOffset: protocol.Duration(s.a.offset.Load()), SkewRefusing: s.skewRefusing}
	n := min(s.lagN, len(s.lags))
	if n > 0 {
		l := make([]time.Duration, n)
		copy(l, s.lags[:n])
		sortDurations(l)
		st.LagP99 = protocol.Duration(max(l[(n*99)/100], 0))
	}
	return st
}

// recordMissed records the fires a misfire plan does not run as one
// SKIPPED attempt (the newest missed fire) with reason "misfire".
func (s *scheduler) recordMissed(j *jobRef, plan schedule.MisfirePlan) {
	aj := j.assigned
	at := plan.LastMissed
	execID := protocol.ExecID(j.id, at)
	si, st := -1, 0
	if aj.shard != nil {
		execID = protocol.BroadcastExecID(j.id, at, aj.shard.Index)
		si, st = aj.shard.Index, aj.shard.Total
	}
	ref, epoch, shard, prio := aj.ref, aj.epoch, aj.shard, aj.job.Priority
	now := s.a.clk.Now().Round(0)
	s.log.Warn("missed fires skipped by misfire policy", "job_id", j.id, "missed", plan.Missed,
		"first", plan.FirstMissed, "last", plan.LastMissed, "policy", aj.job.Misfire.Policy)
	s.a.st.Submit(func(tx *store.Tx) error {
		_, ins, err := tx.InsertExec(store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
			Priority: prio, Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch, ShardIndex: si, ShardTotal: st,
			FinishedAt: now, Outcome: "skipped"})
		if err != nil || !ins {
			return err
		}
		if err := tx.SetLastFire(ref, at); err != nil {
			return err
		}
		r := protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
			ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "misfire"}
		if plan.Missed > 1 && s.a.cfg.Outbox.CoalesceSkipped && plan.FirstMissed.Before(at) {
			r.SkippedCount, r.FirstScheduledAt = min(plan.Missed, protocol.MaxSkippedCount), plan.FirstMissed
		}
		return s.a.enqueue(tx, r)
	}, func(err error) {
		if err == nil {
			s.a.kickOutbox()
		}
	})
}
