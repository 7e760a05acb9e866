package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Writes of an agent's record in ax_agents (registration, heartbeat,
// label, enrollment, revocation) are compare-and-set on the record's
// revision, so that no replica's write overwrites another's it did not
// see. In one replica they are serialized per agent by agentLocks, taken
// before the assign lock (Env.Assign, the controller's assignMu) and held
// across the KV write; the assign lock is taken only after it, to record
// the agent and adjust its assignments.

// agentLockStripes is the number of agent locks; agents hashing to the same
// stripe share one.
const agentLockStripes = 256

// agentLocks serializes the read-modify-write of one agent's record.
type agentLocks struct{ mu [agentLockStripes]sync.Mutex }

// lock locks agent id's stripe and returns its unlock.
func (l *agentLocks) lock(id string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	m := &l.mu[h.Sum32()%agentLockStripes]
	m.Lock()
	return m.Unlock
}

// agentWriteAttempts bounds the compare-and-set attempts of one change to
// an agent's record (each lost one reads the record again; within the
// write's 5 s).
const agentWriteAttempts = 20

// agentChange turns agent id's current record (exists false: none) into
// the record to write; write false leaves it as it is. It may be called
// again with a newer record when another write came between.
type agentChange func(cur protocol.AgentInfo, exists bool) (next protocol.AgentInfo, write bool, err error)

// agentWrite is the outcome of writeAgent.
type agentWrite struct {
	prev    protocol.AgentInfo // the record the change was applied to
	existed bool               // prev is a record (not the zero value)
	info    protocol.AgentInfo // the record written (prev when not written)
	rev     uint64             // info's revision (0: not written)
	written bool
}

// writeAgent applies change to agent id's record as this replica knows it
// and writes the result with compare-and-set on that record's revision;
// when the record changed meanwhile (another replica's write) it reads the
// newer one from ax_agents and applies change to it again. Called with
// id's agentLocks stripe held.
func (s *agentStore) writeAgent(ctx context.Context, id string, change agentChange) (agentWrite, error) {
	cur, rev, _, exists := s.agents.getRev(id)
	return s.writeAgentFrom(ctx, id, cur, rev, exists, change)
}

// writeAgentFrom is writeAgent starting from record cur at revision rev
// (exists false: none), as read before a change made in memory first.
func (s *agentStore) writeAgentFrom(ctx context.Context, id string, cur protocol.AgentInfo, rev uint64, exists bool, change agentChange) (agentWrite, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		next, write, err := change(cloneAgent(cur), exists)
		if err != nil {
			return agentWrite{prev: cur, existed: exists}, err
		}
		if !write {
			return agentWrite{prev: cur, existed: exists, info: cur}, nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return agentWrite{}, fmt.Errorf("encode agent %s: %w", id, err)
		}
		var nrev uint64
		if exists && rev > 0 {
			nrev, err = s.kv.Agents.Update(ctx, id, data, rev)
		} else {
			nrev, err = s.kv.Agents.Create(ctx, id, data)
		}
		if err == nil {
			return agentWrite{prev: cur, existed: exists, info: next, rev: nrev, written: true}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) || attempt == agentWriteAttempts {
			return agentWrite{prev: cur, existed: exists}, fmt.Errorf("store agent %s in ax_agents: %w", id, err)
		}
		// Lost to another write (a heartbeat's liveness, on any replica):
		// wait a little, jittered, so that a write racing a stream of
		// others still gets its turn, then read the newer record.
		if attempt > 2 {
			t := time.NewTimer(time.Duration(rand.Int64N(int64(min(time.Millisecond<<attempt, 50*time.Millisecond)))))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return agentWrite{prev: cur, existed: exists}, fmt.Errorf("store agent %s in ax_agents: %w", id, err)
			}
		}
		if cur, rev, exists, err = s.readAgent(ctx, id); err != nil {
			return agentWrite{}, err
		}
	}
}

// readAgent reads agent id's record from ax_agents (exists false: none,
// or deleted).
func (s *agentStore) readAgent(ctx context.Context, id string) (protocol.AgentInfo, uint64, bool, error) {
	e, err := s.kv.Agents.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return protocol.AgentInfo{}, 0, false, nil
	}
	if err != nil {
		return protocol.AgentInfo{}, 0, false, fmt.Errorf("read agent %s from ax_agents: %w", id, err)
	}
	var a protocol.AgentInfo
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return protocol.AgentInfo{}, 0, false, fmt.Errorf("read agent %s from ax_agents: bad record: %w", id, err)
	}
	a.Online = IsOnline(a, s.now(), s.cfg.AgentOfflineAfter)
	return a, e.Revision(), true, nil
}
