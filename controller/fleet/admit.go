package fleet

import (
	"sync"
	"time"
)

// An agent's requests are admitted per agent before they take a place in
// a queue: at most a few of one agent waiting at a time, and at most a
// burst of them, then one every interval (a token bucket). A registration:
// one waiting, one a second. A heartbeat: two waiting (a periodic one and
// the last one, sent at stop, may cross), five at once, then five per
// heartbeat interval. An agent registers once per connection and
// heartbeats once per interval, each time after the reply to the one
// before (or its timeout), so no bound touches it. They stop one device,
// or a stolen key, that publishes requests as fast as it can: its
// registrations would fill the queue (every other agent told "busy"), its
// heartbeats the queue of its worker and then the subscription that feeds
// every worker (every agent's heartbeats held up, and agents marked
// offline), and either would keep the workers writing its record.
// What the bounds refuse is counted in
// ax_agent_requests_refused_total{reason="repeat"}.
const (
	registerMinInterval = time.Second
	registerWaiting     = 1
	heartbeatWaiting    = 2
	heartbeatBurst      = 5
	// refuseRepeat is the ax_agent_requests_refused_total reason of a
	// request refused by its agent's bounds.
	refuseRepeat = "repeat"
	// admitSweep is the size of an admission map past which it is swept
	// of the agents back at their full allowance (and doubled if still
	// larger, so that a sweep costs a constant per admission).
	admitSweep = 1024
)

// admitState is one agent's allowance.
type admitState struct {
	tokens  float64   // requests it may still make at once
	at      time.Time // env.mono() when tokens was last brought up to date
	waiting int       // admitted and still in the queue
}

// agentAdmissions holds the allowances of the agents for one kind of
// request. The subscription's handler admits, a worker releases; the
// mutex is held for a map operation only.
type agentAdmissions struct {
	// waiting bounds an agent's requests in the queue; burst and every
	// are the token bucket (every 0: no bucket, only the waiting bound).
	// Set before the subscription starts.
	waiting int
	burst   float64
	every   time.Duration

	mu      sync.Mutex
	agents  map[string]admitState
	sweepAt int
}

// refill brings s's tokens up to date at now.
func (a *agentAdmissions) refill(s admitState, now time.Time) admitState {
	if a.every > 0 {
		s.tokens = min(a.burst, s.tokens+float64(now.Sub(s.at))/float64(a.every))
	}
	s.at = now
	return s
}

// admit reports whether a request of agent id received at now may join
// the queue, and if not, how long the agent should wait. An admitted
// request must be released once it leaves the queue, or forgotten when it
// was not queued after all.
func (a *agentAdmissions) admit(id string, now time.Time) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.agents == nil {
		a.agents, a.sweepAt = make(map[string]admitState), admitSweep
	}
	s, ok := a.agents[id]
	if !ok {
		s = admitState{tokens: a.burst, at: now}
	}
	s = a.refill(s, now)
	switch {
	case s.waiting >= a.waiting:
		a.agents[id] = s
		return false, max(a.every, time.Second)
	case a.every > 0 && s.tokens < 1:
		a.agents[id] = s
		return false, time.Duration((1 - s.tokens) * float64(a.every))
	}
	if a.every > 0 {
		s.tokens--
	}
	s.waiting++
	a.agents[id] = s
	if len(a.agents) >= a.sweepAt {
		a.sweep(now)
	}
	return true, 0
}

// release records that an admitted request of agent id left the queue
// (to be handled, or dropped as late).
func (a *agentAdmissions) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.agents[id]; ok && s.waiting > 0 {
		s.waiting--
		a.agents[id] = s
	}
}

// forget undoes the admission of a request of agent id that was not
// queued after all (the queue was full): its token is given back.
func (a *agentAdmissions) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.agents[id]; ok && s.waiting > 0 {
		s.waiting--
		if a.every > 0 {
			s.tokens = min(a.burst, s.tokens+1)
		}
		a.agents[id] = s
	}
}

// sweep removes the agents with nothing waiting and a full allowance at
// now: a new entry starts so.
func (a *agentAdmissions) sweep(now time.Time) {
	for id, s := range a.agents {
		if s.waiting == 0 && (a.every == 0 || a.refill(s, now).tokens >= a.burst) {
			delete(a.agents, id)
		}
	}
	a.sweepAt = max(2*len(a.agents), admitSweep)
}
