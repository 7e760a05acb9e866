package scheduler

import "time"

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
	if epoch > aj.epoch {
		aj.epoch = epoch
		s.runs.fenceMovedOn(j)
	}
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
	s.runs.fenceMovedOn(j)
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
