package controller

import (
	"context"
	"sync"
	"time"
)

// storeLossResendEvery is how often, at most, one agent's runs are sent
// again after it registered with a lost store (storeloss.go). A resend
// scans the live executions and publishes a run command for each pending
// one of the agent: an agent's key that registered "fresh" over and over
// would otherwise have the controller do that once a second (the rate its
// registrations are admitted at), each time on a goroutine of its own.
const storeLossResendEvery = time.Minute

// resendGate runs the resends of runs after store losses: one at a time
// per agent, at most one per interval, and a request that comes while one
// runs or waits is folded into the next (with the latest resume point),
// so that a device whose store really was lost twice still gets its runs.
type resendGate struct {
	every time.Duration
	mono  func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool // false: ctx ended

	mu     sync.Mutex
	agents map[string]*resendState
}

// resendState is one agent's: whether a resend runs (or waits to), the
// resume point of the next (both under the gate's mutex), and when the
// last one started (the active runner's).
type resendState struct {
	active bool
	queued bool
	after  uint64
	last   time.Time
}

// request asks for agent's runs to be sent again after after. The caller's
// goroutine runs the resends (run) unless one for agent is already active,
// in which case the request is folded into it and request returns at once.
func (g *resendGate) request(ctx context.Context, agent string, after uint64, run func(ctx context.Context, after uint64)) {
	g.mu.Lock()
	if g.agents == nil {
		g.agents = make(map[string]*resendState)
	}
	s := g.agents[agent]
	if s == nil {
		s = &resendState{}
		g.agents[agent] = s
	}
	s.after = max(s.after, after)
	if s.active {
		s.queued = true
		g.mu.Unlock()
		return
	}
	s.active = true
	g.mu.Unlock()
	for {
		// s.last is the active runner's alone: read and written without
		// the lock (the mutex orders one runner's end before the next's
		// start).
		if !s.last.IsZero() {
			if wait := g.every - g.mono().Sub(s.last); wait > 0 && !g.sleep(ctx, wait) {
				g.mu.Lock()
				s.active = false
				g.mu.Unlock()
				return
			}
		}
		g.mu.Lock()
		at := s.after
		s.queued = false
		g.mu.Unlock()
		s.last = g.mono()
		run(ctx, at)
		g.mu.Lock()
		again := s.queued
		s.active = again
		g.mu.Unlock()
		if !again {
			return
		}
	}
}
