package scheduler

import (
	"slices"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// View is what a heartbeat or a registration says about the scheduler:
// its counters and its group-job claims. The scheduler goroutine publishes
// it (at start, every tick, when a lease changes, after heartbeat replies
// are applied); the link reads it without waiting for the scheduler, so a
// heartbeat (and the lease renewals it carries) never waits behind fires
// and reports the store has not written yet.
type View struct {
	// Stats are the heartbeat counters (without the outbox depth).
	Stats  protocol.Stats
	leases []viewLease
}

// viewLease is a group job's claim: its epoch and, when held, until when
// the lease is valid (agent monotonic clock; zero: not held).
type viewLease struct {
	jobID string
	epoch uint64
	until time.Time
}

// View returns the last view published (safe from any goroutine).
func (s *Scheduler) View() *View { return s.view.Load() }

// publishView snapshots the heartbeat view (scheduler goroutine only).
func (s *Scheduler) publishView() {
	v := &View{Stats: s.stats()}
	for id, j := range s.jobs.byID {
		if aj := j.assigned; aj != nil && aj.epoch > 0 {
			v.leases = append(v.leases, viewLease{jobID: id, epoch: aj.epoch, until: aj.leaseUntil})
		}
	}
	s.view.Store(v)
}

// Claims lists every group job assigned here with an epoch, held or not
// (what ClaimedLeases says, as of the view).
func (v *View) Claims() []protocol.HeldLease {
	var out []protocol.HeldLease
	for _, l := range v.leases {
		out = append(out, protocol.HeldLease{JobID: l.jobID, Epoch: l.epoch})
	}
	return out
}

// Held lists the leases valid at now (as of the view).
func (v *View) Held(now time.Time) []protocol.HeldLease {
	var out []protocol.HeldLease
	for _, l := range v.leases {
		if !l.until.IsZero() && now.Before(l.until) {
			out = append(out, protocol.HeldLease{JobID: l.jobID, Epoch: l.epoch})
		}
	}
	return out
}

// stats are the heartbeat counters (without the outbox depth).
func (s *Scheduler) stats() protocol.Stats {
	r := s.runs
	st := protocol.Stats{Pending: s.trig.pending, Running: len(r.running), QueueDepth: r.mem,
		ClockOffset: protocol.Duration(s.env.host.ClockOffset()), SkewRefusing: s.trig.skewRefusing}
	n := min(r.lagN, len(r.lags))
	if n > 0 {
		l := make([]time.Duration, n)
		copy(l, r.lags[:n])
		slices.Sort(l)
		st.LagP99 = protocol.Duration(max(l[(n*99)/100], 0))
	}
	return st
}

// ClaimedLeases lists the group jobs assigned here with an epoch, valid or
// not: a heartbeat claims them all, so the controller renews the held ones
// and grants the new ones (or answers that they are lost). Call it once
// Run has returned (a clean stop hands them back).
func (s *Scheduler) ClaimedLeases() []protocol.HeldLease { return s.jobs.claimed() }

// heartbeatReplied applies a heartbeat reply's leases, then the skew check.
func (s *Scheduler) heartbeatReplied(m heartbeatReplied) {
	for _, r := range m.renewed {
		s.leaseGranted(r.JobID, r.Epoch, m.t0, r.TTL.D())
	}
	for _, h := range m.lost {
		s.leaseRevoked(h.JobID, h.Epoch)
	}
	s.trig.checkSkew()
}

// leaseGranted records a lease valid for ttl from at (monotonic).
func (s *Scheduler) leaseGranted(jobID string, epoch uint64, at time.Time, ttl time.Duration) {
	log := s.env.cfg.Log
	j := s.jobs.byID[jobID]
	if j == nil || j.assigned == nil {
		log.Warn("lease for a job not assigned here; ignored", "job_id", jobID, "epoch", epoch)
		return
	}
	aj := j.assigned
	if epoch < aj.epoch {
		log.Warn("stale lease epoch ignored", "job_id", jobID, "epoch", epoch, "held", aj.epoch)
		return
	}
	wasValid := s.trig.canFire(j)
	aj.epoch = epoch
	aj.leaseUntil = at.Add(ttl)
	aj.lapseSaid = false
	if !wasValid {
		log.Info("lease acquired", "job_id", jobID, "epoch", epoch, "ttl", ttl)
		s.trig.replan(j, false)
	}
}

// leaseEpoch records a lease_grant command: the job's epoch moves to epoch
// (never back), but the lease is not valid until a heartbeat reply renews
// it. A grant read from the command stream may be hours old (an agent that
// was offline); only a heartbeat reply, timed from when the heartbeat was
// sent, proves the controller still holds the lease for this agent.
func (s *Scheduler) leaseEpoch(jobID string, epoch uint64) {
	j := s.jobs.byID[jobID]
	if j == nil || j.assigned == nil || epoch <= j.assigned.epoch {
		return
	}
	j.assigned.epoch, j.assigned.leaseUntil = epoch, time.Time{}
	s.kickHeartbeat()
}

// leaseRevoked stops a group job at once.
func (s *Scheduler) leaseRevoked(jobID string, epoch uint64) {
	j := s.jobs.byID[jobID]
	if j == nil || j.assigned == nil || epoch < j.assigned.epoch {
		return
	}
	if j.assigned.leaseUntil.IsZero() {
		return // not held: nothing changes (a heartbeat repeats a loss)
	}
	j.assigned.leaseUntil = time.Time{}
	s.env.cfg.Log.Info("lease revoked", "job_id", jobID, "epoch", epoch)
}

// kickHeartbeat publishes the view with the job's new claim and asks the
// link for a heartbeat now: a group job's lease is granted and renewed
// only by heartbeat replies (valid from when the heartbeat was sent), so
// a new grant is claimed without waiting a period.
func (s *Scheduler) kickHeartbeat() {
	s.publishView()
	s.env.host.KickHeartbeat()
}

// assigned runs after an assign command is durable.
func (s *Scheduler) assigned(row store.Job) {
	log := s.env.cfg.Log
	if err := s.jobs.load(row); err != nil {
		log.Error("assigned job is invalid; not planned", "job_id", row.ID, "err", err)
		return
	}
	j := s.jobs.byID[row.ID]
	log.Info("job assigned", "job_id", row.ID, "generation", row.Generation, "epoch", row.Epoch,
		"schedule", j.assigned.job.Schedule, "paused", j.assigned.job.Paused)
	s.trig.replan(j, false)
	if row.Epoch > 0 && !s.trig.canFire(j) {
		s.kickHeartbeat() // claim the lease of the new epoch now
	}
}

// unassigned runs after an unassign command is durable.
func (s *Scheduler) unassigned(id string) {
	j := s.jobs.byID[id]
	if j == nil || j.assigned == nil {
		return
	}
	s.trig.flushSkip(j)
	delete(s.jobs.byRef, j.assigned.ref)
	j.assigned = nil
	s.env.cfg.Log.Info("job unassigned", "job_id", id)
	s.jobs.gc(j)
}
