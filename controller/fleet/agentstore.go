package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Heartbeats and ax_agents: the replica that answers a heartbeat records
// the agent's liveness in memory and writes ax_agents only when something
// other replicas must know changed (the agent came online, sent its first
// heartbeat or is stopping, its lease claims changed) or when the stored
// last-seen time is older than storedLivenessRefresh. Meanwhile the other
// replicas, and this one after a restart, read the agent's liveness from
// the replicas' digests (livedigest.go). Every such write is a compare-and-set on
// the record's revision: a label change, revocation or registration written
// in between (by any replica) is read back and kept, only the liveness is
// carried over.
//
// A heartbeat without lease claims (now or before) that is not stopping is
// answered from memory and never waits for ax_agents: its write (the
// refresh, the first heartbeat, coming online) is left to the liveness
// writers (livenessWriters), which write the agent's record as it is in
// memory when they get to it. (When the stored record was refreshed every
// livenessRefresh, at 10,000 agents that was over a thousand writes a
// second; done by the heartbeat workers, each one held up every heartbeat
// queued behind it, p99 0.4–1.3 s.)

// livenessRefresh is how stale another replica's view of an agent's
// last-seen time may grow: agent_offline_after less one and a half
// heartbeat intervals, so that it still sees an agent online that
// heartbeats on time. The liveness digests are written twice as often.
func (s *agentStore) livenessRefresh() time.Duration {
	return max(0, s.cfg.AgentOfflineAfter-s.cfg.HeartbeatInterval*3/2)
}

// heartbeatWrite reports whether a heartbeat turning record prev (last
// stored with last-seen time kvSeen) into cur must be written to ax_agents.
func (s *agentStore) heartbeatWrite(prev, cur protocol.AgentInfo, kvSeen, now time.Time) bool {
	switch {
	case !IsOnline(prev, now, s.cfg.AgentOfflineAfter), !cur.StoppedAt.IsZero(), !sameHeld(prev.Leases, cur.Leases),
		prev.HeartbeatAt.IsZero(): // the first heartbeat: its stats are kept across restarts
		return true
	}
	return now.Sub(kvSeen) >= s.storedRefresh()
}

// storedRefresh is how stale the last-seen time in ax_agents may grow
// before a heartbeat writes it again: storedLivenessRefresh, the digests
// carry the liveness meanwhile; 0 (every heartbeat is written, no digest)
// when agent_offline_after leaves no room for a digest's delay
// (livenessRefresh 0: agent_offline_after at most one and a half
// heartbeat intervals).
func (s *agentStore) storedRefresh() time.Duration {
	if s.livenessRefresh() == 0 {
		return 0
	}
	return max(s.livenessRefresh(), storedLivenessRefresh)
}

// sameHeld reports whether a and b hold the same leases in the same order.
func sameHeld(a, b []protocol.HeldLease) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// storeLiveness writes info to ax_agents if the record is still at
// revision rev. When another write came between, it reads that record,
// carries the liveness of info over (last seen, heartbeat time, stats,
// leases, stop time, clock offset, and the command cursor when higher)
// and tries again. It returns the record
// written and its revision.
func (s *agentStore) storeLiveness(ctx context.Context, info protocol.AgentInfo, rev uint64) (protocol.AgentInfo, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		data, err := json.Marshal(info)
		if err != nil {
			return info, 0, err
		}
		nrev, err := s.agents.kv.Update(ctx, info.Agent, data, rev)
		if err == nil {
			return info, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) || attempt == 5 {
			return info, 0, fmt.Errorf("store liveness of agent %s: %w", info.Agent, err)
		}
		e, err := s.kv.Agents.Get(ctx, info.Agent)
		if err != nil {
			return info, 0, fmt.Errorf("store liveness of agent %s: read the newer record: %w", info.Agent, err)
		}
		var cur protocol.AgentInfo
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return info, 0, fmt.Errorf("store liveness of agent %s: bad record: %w", info.Agent, err)
		}
		if cur.Revoked || !Registered(cur) {
			return cur, e.Revision(), errAgentGone
		}
		cur.LastSeen, cur.HeartbeatAt, cur.Stats, cur.Online = info.LastSeen, info.HeartbeatAt, info.Stats, info.Online
		cur.Leases, cur.StoppedAt, cur.ClockOffset = info.Leases, info.StoppedAt, info.ClockOffset
		cur.Cursor = max(cur.Cursor, info.Cursor)
		info, rev = cur, e.Revision()
	}
}

// livenessWriters is how many goroutines write the liveness of heartbeats
// answered from memory to ax_agents.
const livenessWriters = 8

// livenessQueue holds the agents whose record in ax_agents is behind the
// liveness in memory, each once.
type livenessQueue struct {
	mu    sync.Mutex
	dirty map[string]struct{}
	order []string
	kick  chan struct{}
}

func newLivenessQueue() *livenessQueue {
	return &livenessQueue{dirty: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

// mark queues agent id's liveness to be written (once, however often
// marked before it is).
func (q *livenessQueue) mark(id string) {
	q.mu.Lock()
	if _, ok := q.dirty[id]; !ok {
		q.dirty[id] = struct{}{}
		q.order = append(q.order, id)
	}
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// next takes the next queued agent (ok false: none).
func (q *livenessQueue) next() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		if cap(q.order) > 1024 {
			q.order = nil // after a storm
		}
		return "", false
	}
	id := q.order[0]
	q.order = q.order[1:]
	delete(q.dirty, id)
	return id, true
}

// pending returns how many agents are queued.
func (q *livenessQueue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// startLivenessWriters starts the goroutines that write queued liveness.
func (s *agentStore) startLivenessWriters() {
	for range livenessWriters {
		s.goRun(func(ctx context.Context) {
			for {
				id, ok := s.agents.live.next()
				if !ok {
					select {
					case <-ctx.Done():
						return
					case <-s.agents.live.kick:
						// Another writer may need waking too.
						if s.agents.live.pending() > 1 {
							select {
							case s.agents.live.kick <- struct{}{}:
							default:
							}
						}
					}
					continue
				}
				if err := s.writeLiveness(ctx, id); err != nil && ctx.Err() == nil {
					s.log.Warn("store heartbeat", "agent", id, "err", err)
				}
			}
		})
	}
}

// writeLiveness writes agent id's record as it is in memory to ax_agents,
// compare-and-set on the revision it was read at. When another write came
// between (a registration, label change, revocation, a heartbeat's state
// change, another replica), that record is read into memory (which keeps
// a later liveness answered here, putRev) and the write is tried again
// from memory, unless nothing is left to write.
func (s *agentStore) writeLiveness(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		info, rev, kvSeen, ok := s.agents.getRev(id)
		if !ok || rev == 0 || info.Revoked || !Registered(info) || !info.LastSeen.After(kvSeen) {
			return nil // gone, never stored here, or stored already
		}
		data, err := json.Marshal(info)
		if err != nil {
			return fmt.Errorf("store liveness of agent %s: %w", id, err)
		}
		nrev, err := s.agents.kv.Update(ctx, id, data, rev)
		if err == nil {
			s.agents.putRev(info, nrev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) || attempt == 5 {
			return fmt.Errorf("store liveness of agent %s: %w", id, err)
		}
		cur, crev, exists, err := s.readAgent(ctx, id)
		if err != nil {
			return fmt.Errorf("store liveness of agent %s: %w", id, err)
		}
		if !exists {
			return nil
		}
		s.agents.putRev(cur, crev)
	}
}

// hasRev reports whether agent id's record is recorded at revision rev or
// a later one.
func (r *Registry) hasRev(id string, rev uint64) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.agents[id]
	return ok && e.rev >= rev
}

func (f *Fleet) refreshOnline() {
	off, online, known := f.agents.sweep(f.now(), f.cfg.AgentOfflineAfter)
	for _, id := range off {
		f.log.Warn("agent offline", "agent", id, "after", f.cfg.AgentOfflineAfter)
	}
	f.m.agentsOnline.Set(float64(online))
	f.m.agentsKnown.Set(float64(known))
}

// LivenessLoop marks agents offline when their heartbeats stop (every
// heartbeat interval, until ctx ends) and sets ax_agents_online and
// ax_agents_known.
func (f *Fleet) LivenessLoop(ctx context.Context) {
	f.every(ctx, f.cfg.HeartbeatInterval, f.cfg.HeartbeatInterval, "liveness", func(context.Context) error {
		f.refreshOnline()
		return nil
	})
}
