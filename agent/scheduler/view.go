package scheduler

import (
	"slices"
	"time"

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
