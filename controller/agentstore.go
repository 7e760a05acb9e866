package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Heartbeats and ax_agents: the replica that answers a heartbeat records
// the agent's liveness in memory and writes ax_agents only when something
// other replicas must know changed (the agent came online, sent its first
// heartbeat or is stopping, its lease claims changed) or when the stored last-seen time is older than
// livenessRefresh (so that other replicas, and this one after a restart,
// keep seeing the agent online). Every such write is a compare-and-set on
// the record's revision: a label change, revocation or registration written
// in between (by any replica) is read back and kept, only the liveness is
// carried over.

// livenessRefresh is how stale the last-seen time in ax_agents may grow
// before a heartbeat writes it again: agent_offline_after less one and a
// half heartbeat intervals, so that a replica reading ax_agents still sees
// an agent online that heartbeats on time (0: every heartbeat writes).
func (c *Controller) livenessRefresh() time.Duration {
	return max(0, c.cfg.AgentOfflineAfter-c.cfg.HeartbeatInterval*3/2)
}

// heartbeatWrite reports whether a heartbeat turning record prev (last
// stored with last-seen time kvSeen) into cur must be written to ax_agents.
func (c *Controller) heartbeatWrite(prev, cur protocol.AgentInfo, kvSeen, now time.Time) bool {
	switch {
	case !isOnline(prev, now, c.cfg.AgentOfflineAfter), !cur.StoppedAt.IsZero(), !sameHeld(prev.Leases, cur.Leases),
		prev.HeartbeatAt.IsZero(): // the first heartbeat: its stats are kept across restarts
		return true
	}
	return now.Sub(kvSeen) >= c.livenessRefresh()
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

// errAgentGone: the record of the agent was revoked or deleted while its
// heartbeat was being stored.
var errAgentGone = errors.New("agent revoked or removed meanwhile")

// storeLiveness writes info to ax_agents if the record is still at
// revision rev. When another write came between, it reads that record,
// carries the liveness of info over (last seen, heartbeat time, stats,
// leases, stop time, clock offset) and tries again. It returns the record
// written and its revision.
func (c *Controller) storeLiveness(ctx context.Context, info protocol.AgentInfo, rev uint64) (protocol.AgentInfo, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		data, err := json.Marshal(info)
		if err != nil {
			return info, 0, err
		}
		nrev, err := c.kv.Agents.Update(ctx, info.Agent, data, rev)
		if err == nil {
			return info, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) || attempt == 5 {
			return info, 0, fmt.Errorf("store liveness of agent %s: %w", info.Agent, err)
		}
		e, err := c.kv.Agents.Get(ctx, info.Agent)
		if err != nil {
			return info, 0, fmt.Errorf("store liveness of agent %s: read the newer record: %w", info.Agent, err)
		}
		var cur protocol.AgentInfo
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return info, 0, fmt.Errorf("store liveness of agent %s: bad record: %w", info.Agent, err)
		}
		if cur.Revoked || !registered(cur) {
			return cur, e.Revision(), errAgentGone
		}
		cur.LastSeen, cur.HeartbeatAt, cur.Stats, cur.Online = info.LastSeen, info.HeartbeatAt, info.Stats, info.Online
		cur.Leases, cur.StoppedAt, cur.ClockOffset = info.Leases, info.StoppedAt, info.ClockOffset
		info, rev = cur, e.Revision()
	}
}
