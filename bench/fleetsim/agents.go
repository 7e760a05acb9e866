package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// The simulated agents: shared connections, registration with ax-agent's
// backoff, heartbeats.

// conn is a NATS connection shared by agents, with one subscription for
// the replies to all of them (each agent's reply subject is under its own
// inbox prefix, as the controller requires).
type conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	mu      sync.Mutex
	waiting map[string]chan reply
	seq     atomic.Int64
	agents  []*agent // the agents using it (under mu)
}

// reply is a reply and when the connection's reply subscription got it.
type reply struct {
	m  *nats.Msg
	at time.Time
}

// request sends a request and waits for its reply (3 s, as ax-agent's
// default nats.request_timeout); it returns the reply and when the reply
// subscription received it.
func (c *conn) request(ctx context.Context, id, subj string, data []byte) (*nats.Msg, time.Time, error) {
	inbox := protocol.InboxPrefix(id) + ".r" + strconv.FormatInt(c.seq.Add(1), 10)
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.waiting[inbox] = ch
	c.mu.Unlock()
	defer func() { c.mu.Lock(); delete(c.waiting, inbox); c.mu.Unlock() }()
	if err := c.nc.PublishRequest(subj, inbox, data); err != nil {
		return nil, time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	select {
	case r := <-ch:
		return r.m, r.at, nil
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
}

// do sends a request for agent a and returns the reply, the round trip
// to the agent's goroutine and the part of it spent in the simulator
// after the reply subscription received it (scheduling delay).
func (s *sim) do(ctx context.Context, a *agent, subj string, v interface{ Validate() error }) (*nats.Msg, time.Duration, time.Duration, error) {
	data, err := protocol.Encode(v)
	if err != nil {
		return nil, 0, 0, err
	}
	t0 := time.Now()
	m, at, err := a.c.request(ctx, a.id, subj, data)
	t1 := time.Now()
	if err != nil {
		return nil, t1.Sub(t0), 0, err
	}
	return m, t1.Sub(t0), t1.Sub(at), nil
}

// register sends agent a's registration; after a failure it returns the
// RetryAfter of a busy answer (0: none) and the error, ErrNoResponders
// when no controller is subscribed.
func (s *sim) register(ctx context.Context, a *agent) (time.Duration, error) {
	m, d, _, err := s.do(ctx, a, protocol.RegisterSubject(a.id), protocol.Register{V: protocol.Version, Agent: a.id,
		Labels: map[string]string{"site": a.site, "role": "sim"}, Handlers: []string{"noop"}, Version: "sim", OS: "linux", Arch: "arm64", SentAt: time.Now().UTC(), Boot: "sim",
		Cursor: a.cursor.Load()})
	var busy time.Duration
	if err == nil && m.Header.Get("Status") == "503" {
		err = nats.ErrNoResponders
	}
	if err == nil {
		var r protocol.RegisterReply
		if r, err = protocol.DecodeRegisterReply(m.Data); err == nil && r.Error != "" {
			err = errors.New(r.Error)
			busy = r.RetryAfter.D()
		} else if err == nil {
			s.shards.Store(int64(r.Shards))
		}
	}
	if err != nil {
		s.regErr.Add(1)
		return busy, err
	}
	s.mu.Lock()
	s.regRTT = append(s.regRTT, d)
	s.mu.Unlock()
	a.reg.Store(true)
	return 0, nil
}

// loop registers with capped full-jitter backoff, then heartbeats, as
// ax-agent does (agent/link.go): a heartbeat refused by the controller
// registers again; one without an answer is retried after a full-jitter
// backoff (up to min(30 s, heartbeat × 2^(n−1))) without registering.
func (s *sim) loop(ctx context.Context, a *agent) {
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		case <-a.wake:
		}
		return true
	}
	fails, hbFails := 0, 0
	next := s.c.hb
	if !sleep(time.Duration(rand.Int64N(int64(s.c.hb)))) {
		return
	}
	for ctx.Err() == nil {
		if !a.reg.Load() {
			if a.spread.Swap(false) {
				// Reconnected: the backoff restarts, the first attempt is
				// spread over min(heartbeat, 4 × reconnect wait).
				fails = 0
				if !sleep(jitter(1, min(s.c.hb, 4*reconnectWait), maxBackoff)) {
					return
				}
			}
			if busy, err := s.register(ctx, a); err != nil {
				fails++
				d := s.retryIn(fails, busy, err)
				if busy > 0 {
					fails = 0 // an answer: the backoff starts again
				}
				if !sleep(d) {
					return
				}
				continue
			}
			fails, next = 0, s.c.hb
		}
		if a.reg.Load() && !a.cons.Load() {
			_ = s.startCommands(ctx, a) // counted; tried again after the next heartbeat
		}
		if !sleep(next) {
			return
		}
		if !a.reg.Load() {
			continue // reconnected meanwhile: register first
		}
		m, d, wake, err := s.do(ctx, a, protocol.HeartbeatSubject(a.id), protocol.Heartbeat{V: protocol.Version, Agent: a.id,
			SentAt: time.Now().UTC(), Boot: "sim", Cursor: a.cursor.Load()})
		if err != nil { // no answer: back off, heartbeat again
			s.hbErr.Add(1)
			hbFails++
			next = time.Duration(rand.Int64N(int64(min(30*time.Second, s.c.hb<<min(hbFails-1, 5)))))
			continue
		}
		r, derr := protocol.DecodeHeartbeatReply(m.Data)
		if derr != nil || r.Error != "" {
			s.hbErr.Add(1)
			a.reg.Store(false) // refused: register again
			continue
		}
		hbFails, next = 0, s.c.hb
		sent := time.Now().Add(-d)
		s.mu.Lock()
		// Same clock: the controller's reply time splits the round trip.
		s.hbOut = append(s.hbOut, r.ControllerTime.Sub(sent))
		s.hbRTT = append(s.hbRTT, d)
		s.hbWake = append(s.hbWake, wake)
		s.mu.Unlock()
	}
}

// As ax-agent's defaults (agent/config.go, backoff.go).
const (
	reconnectWait = 500 * time.Millisecond
	maxBackoff    = 30 * time.Second
)

// jitter is ax-agent's fullJitter: uniform in [0, min(limit, base·2^(n-1))].
func jitter(n int, base, limit time.Duration) time.Duration {
	d := limit
	if n <= 32 && base<<(n-1) > 0 && base<<(n-1) < limit {
		d = base << (n - 1)
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// retryIn is ax-agent's wait after the n-th failed registration in a row
// (agent/link.go retryIn): a busy answer's RetryAfter plus up to a quarter
// of it (and the failures count from 0 again); without a controller (no responders) full jitter capped at two
// heartbeat intervals; otherwise full jitter capped at 30 s.
func (s *sim) retryIn(n int, busy time.Duration, err error) time.Duration {
	base := 2 * reconnectWait
	switch {
	case busy > 0:
		return busy + jitter(1, busy/4, maxBackoff)
	case errors.Is(err, nats.ErrNoResponders):
		return jitter(n, base, max(base, 2*s.c.hb))
	}
	return jitter(n, base, maxBackoff)
}
