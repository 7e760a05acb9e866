package fleet

import (
	"sync"
	"time"
)

// Registrations are admitted per agent: at most one of an agent waiting
// in the queue at a time, and at most one admitted per agent every
// registerMinInterval (Config.RegisterMinInterval). Anything more from the same agent is answered
// "busy" with a RetryAfter at once (refused{reason="repeat"}). An agent
// registers once per connection, and retries after its request timeout
// (3 s) or a busy answer's RetryAfter, so neither bound touches it; they
// stop one device, or a stolen key, that publishes registrations as fast
// as it can from filling the queue (every other agent would be told
// "busy") and from making the controller write its record without pause.
const (
	registerMinInterval = time.Second
	// refuseRepeat is the ax_agent_requests_refused_total reason of a
	// registration refused by the per-agent bounds.
	refuseRepeat = "repeat"
	// regAdmitSweep is the size of the admission map past which it is
	// swept of agents that may register again (and doubled if still
	// larger, so that a sweep costs a constant per admission).
	regAdmitSweep = 1024
)

// regAdmit is one agent's admission state.
type regAdmit struct {
	at       time.Time // env.mono() when its last registration was admitted
	inFlight bool      // one is in the queue or in a worker
}

// regAdmissions holds the per-agent admission state of the registration
// queue. The subscription's handler admits, a worker releases; the mutex
// is held for a map operation only.
type regAdmissions struct {
	// minInterval is Config.RegisterMinInterval with its default; 0: no
	// bound. Set before the subscription starts.
	minInterval time.Duration

	mu      sync.Mutex
	agents  map[string]regAdmit
	sweepAt int
}

// admit reports whether a registration of agent id received at now may
// join the queue, and if not, how long the agent should wait. An admitted
// registration must be released once handled or dropped.
func (a *regAdmissions) admit(id string, now time.Time) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.agents == nil {
		a.agents, a.sweepAt = make(map[string]regAdmit), regAdmitSweep
	}
	cur, ok := a.agents[id]
	if ok {
		if cur.inFlight {
			return false, max(a.minInterval, registerBusyMin)
		}
		if wait := a.minInterval - now.Sub(cur.at); wait > 0 {
			return false, wait
		}
	}
	a.agents[id] = regAdmit{at: now, inFlight: true}
	if len(a.agents) >= a.sweepAt {
		a.sweep(now)
	}
	return true, 0
}

// release records that the admitted registration of agent id left the
// queue (handled, or dropped as late).
func (a *regAdmissions) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.agents[id]; ok {
		cur.inFlight = false
		a.agents[id] = cur
	}
}

// forget undoes the admission of agent id's registration that was not
// queued after all (the queue was full): it was not made.
func (a *regAdmissions) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.agents, id)
}

// sweep removes the agents that may register again at now.
func (a *regAdmissions) sweep(now time.Time) {
	for id, cur := range a.agents {
		if !cur.inFlight && now.Sub(cur.at) >= a.minInterval {
			delete(a.agents, id)
		}
	}
	a.sweepAt = max(2*len(a.agents), regAdmitSweep)
}
