package admission

import (
	"sync"
	"time"
)

// sweepMin is the size of the map past which it is first swept.
const sweepMin = 1024

// Bounds are the limits per agent. The zero value admits everything.
type Bounds struct {
	// Waiting is how many admitted requests of one agent may be waiting
	// (admitted and not yet released); 0: no bound.
	Waiting int
	// Burst and Every are the token bucket: Burst requests at once, then
	// one every Every. Every 0: no bucket.
	Burst int
	Every time.Duration
}

// state is one agent's allowance.
type state struct {
	tokens  float64   // requests it may still make at once
	at      time.Time // when tokens was last brought up to date
	waiting int       // admitted and not yet released
}

// Admissions holds the allowances of the agents for one kind of request.
// Make it with New.
type Admissions struct {
	b Bounds

	mu      sync.Mutex
	agents  map[string]state
	sweepAt int
}

// New returns the admissions of bounds b (a bucket's Burst is at least
// 1).
func New(b Bounds) *Admissions {
	if b.Every > 0 {
		b.Burst = max(b.Burst, 1)
	}
	return &Admissions{b: b, agents: make(map[string]state), sweepAt: sweepMin}
}

// refill brings s's tokens up to date at now.
func (a *Admissions) refill(s state, now time.Time) state {
	if a.b.Every > 0 && now.After(s.at) {
		s.tokens = min(float64(a.b.Burst), s.tokens+float64(now.Sub(s.at))/float64(a.b.Every))
		s.at = now
	}
	return s
}

// Admit reports whether a request of agent id received at now is
// admitted, and if not, how long the agent should wait before the next.
// An admitted request is released once it leaves the queue (Release), or
// forgotten when it was not queued after all (Forget).
func (a *Admissions) Admit(id string, now time.Time) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.agents[id]
	if !ok {
		s = state{tokens: float64(a.b.Burst), at: now}
	}
	s = a.refill(s, now)
	switch {
	case a.b.Waiting > 0 && s.waiting >= a.b.Waiting:
		a.agents[id] = s
		return false, max(a.b.Every, time.Second)
	case a.b.Every > 0 && s.tokens < 1:
		a.agents[id] = s
		return false, time.Duration((1 - s.tokens) * float64(a.b.Every))
	}
	if a.b.Every > 0 {
		s.tokens--
	}
	s.waiting++
	a.agents[id] = s
	if len(a.agents) >= a.sweepAt {
		a.sweep(now)
	}
	return true, 0
}

// Release records that an admitted request of agent id is no longer
// waiting (taken by a worker, dropped, or answered).
func (a *Admissions) Release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.agents[id]; ok && s.waiting > 0 {
		s.waiting--
		a.agents[id] = s
	}
}

// Forget undoes the admission of a request of agent id that was not
// queued after all (the queue was full): its token is given back.
func (a *Admissions) Forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.agents[id]; ok && s.waiting > 0 {
		s.waiting--
		if a.b.Every > 0 {
			s.tokens = min(float64(a.b.Burst), s.tokens+1)
		}
		a.agents[id] = s
	}
}

// Len returns how many agents the admissions hold state for.
func (a *Admissions) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.agents)
}

// sweep removes the agents with nothing waiting and a full allowance at
// now (a new entry starts so), and sets the size of the next sweep.
func (a *Admissions) sweep(now time.Time) {
	for id, s := range a.agents {
		if s.waiting == 0 && (a.b.Every == 0 || a.refill(s, now).tokens >= float64(a.b.Burst)) {
			delete(a.agents, id)
		}
	}
	a.sweepAt = max(2*len(a.agents), sweepMin)
}
