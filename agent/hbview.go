package agent

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// hbView is what a heartbeat or a registration says about the scheduler:
// its counters and its group-job claims. The scheduler goroutine publishes
// it (at start, every tick, when a lease changes, after heartbeat replies
// are applied); the link reads it without waiting for the scheduler, so a
// heartbeat (and the lease renewals it carries) never waits behind fires
// and reports the store has not written yet.
type hbView struct {
	stats  protocol.Stats
	leases []viewLease
}

// viewLease is a group job's claim: its epoch and, when held, until when
// the lease is valid (agent monotonic clock; zero: not held).
type viewLease struct {
	jobID string
	epoch uint64
	until time.Time
}

// publishView snapshots the heartbeat view (scheduler goroutine only).
func (s *scheduler) publishView() {
	v := &hbView{stats: s.stats()}
	for id, j := range s.jobs {
		if aj := j.assigned; aj != nil && aj.epoch > 0 {
			v.leases = append(v.leases, viewLease{jobID: id, epoch: aj.epoch, until: aj.leaseUntil})
		}
	}
	s.view.Store(v)
}

// claims lists every group job assigned here with an epoch, held or not
// (what claimedLeases says, as of the view).
func (v *hbView) claims() []protocol.HeldLease {
	var out []protocol.HeldLease
	for _, l := range v.leases {
		out = append(out, protocol.HeldLease{JobID: l.jobID, Epoch: l.epoch})
	}
	return out
}

// held lists the leases valid at now (what heldLeases says, as of the view).
func (v *hbView) held(now time.Time) []protocol.HeldLease {
	var out []protocol.HeldLease
	for _, l := range v.leases {
		if !l.until.IsZero() && now.Before(l.until) {
			out = append(out, protocol.HeldLease{JobID: l.jobID, Epoch: l.epoch})
		}
	}
	return out
}
