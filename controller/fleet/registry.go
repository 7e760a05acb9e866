package fleet

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Registry mirrors KV ax_agents in memory, one per replica (Fleet.Registry).
// Writes go through the fleet alone: the registration and heartbeat
// handlers, enrollment, revocation and labels (which also write KV) and
// the followers of ax_agents and ax_liveness. The rest of the controller
// reads it (Get, Snapshot, OnlineIDs). All methods are safe for
// concurrent use and return copies.
type Registry struct {
	mu     sync.RWMutex
	agents map[string]*agentEntry
	n      agentCounts // kept current by putRev and sweep (agentcounts.go)
	// live: agents whose liveness in memory is still to be written to
	// ax_agents (agentstore.go).
	live *livenessQueue
	// kv is ax_agents as the heartbeat path writes it (liveness), set at
	// start (Fleet.StartResponders).
	kv jetstream.KeyValue
}

type agentEntry struct {
	info   protocol.AgentInfo
	online bool   // as last seen by the liveness loop
	rev    uint64 // KV revision of info (0: written here, revision unknown)
	// kvSeen is LastSeen as stored at rev; info.LastSeen may be later (a
	// heartbeat answered here and not written, agentstore.go).
	kvSeen time.Time
	// kvCursor is the command cursor stored at rev (info.Cursor may be
	// later: a heartbeat's, not written yet); the removal of applied
	// commands goes no further (StoredCursors).
	kvCursor uint64
	// heard is when this replica last answered a heartbeat of the agent
	// from memory (its liveness digest carries it, livedigest.go).
	heard time.Time
}

func newRegistry() *Registry {
	return &Registry{agents: map[string]*agentEntry{}, live: newLivenessQueue()}
}

func cloneAgent(a protocol.AgentInfo) protocol.AgentInfo {
	if a.Labels != nil {
		l := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			l[k] = v
		}
		a.Labels = l
	}
	a.Handlers = slices.Clone(a.Handlers)
	a.Leases = slices.Clone(a.Leases)
	return a
}

// getRev returns agent id's record, its KV revision and the last-seen
// time stored at that revision.
func (r *Registry) getRev(id string) (protocol.AgentInfo, uint64, time.Time, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.agents[id]
	if !ok {
		return protocol.AgentInfo{}, 0, time.Time{}, false
	}
	return cloneAgent(e.info), e.rev, e.kvSeen, true
}

// Get returns agent id's record as this replica knows it (ok false: no
// record). Its Online is as last recorded; IsOnline tells it at a time.
func (r *Registry) Get(id string) (protocol.AgentInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.agents[id]
	if !ok {
		return protocol.AgentInfo{}, false
	}
	return cloneAgent(e.info), true
}

// put records info and returns whether the agent was online before.
func (r *Registry) put(info protocol.AgentInfo) (wasOnline bool) {
	wasOnline, _ = r.putRev(info, 0)
	return wasOnline
}

// putRev records info read from KV at revision rev, unless a newer
// revision is recorded already (another replica's write seen late).
func (r *Registry) putRev(info protocol.AgentInfo, rev uint64) (wasOnline, applied bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[info.Agent]
	if !ok {
		e = &agentEntry{}
		r.agents[info.Agent] = e
	}
	wasOnline = e.online
	if rev != 0 && rev < e.rev {
		return wasOnline, false
	}
	r.n.add(e, -1)
	defer r.n.add(e, 1)
	kvSeen := info.LastSeen
	kvCursor := info.Cursor
	if rev != 0 && e.info.Boot == info.Boot && e.info.LastSeen.After(info.LastSeen) && info.StoppedAt.IsZero() {
		// A heartbeat answered here since, not written (agentstore.go).
		info.LastSeen, info.HeartbeatAt, info.Online, info.Stats = e.info.LastSeen, e.info.HeartbeatAt, e.info.Online, e.info.Stats
		info.Cursor = max(info.Cursor, e.info.Cursor)
	}
	e.info = cloneAgent(info)
	e.online = info.Online
	if rev != 0 {
		e.rev, e.kvSeen, e.kvCursor = rev, kvSeen, kvCursor
	}
	return wasOnline, true
}

// putLive records the liveness of heartbeat info (last seen, heartbeat
// time, stats, clock offset, online, not stopped) on agent info.Agent's
// current record, whatever else changed in it since info was read (a
// label change or registration seen meanwhile stays, with its revision).
// It returns whether the agent was online before; ok is false when the
// agent is not known.
func (r *Registry) putLive(info protocol.AgentInfo) (wasOnline, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[info.Agent]
	if !ok {
		return false, false
	}
	wasOnline = e.online
	r.n.add(e, -1)
	e.info.LastSeen, e.info.HeartbeatAt, e.info.Stats, e.info.ClockOffset = info.LastSeen, info.HeartbeatAt, info.Stats, info.ClockOffset
	e.info.Online, e.info.StoppedAt = info.Online, info.StoppedAt
	e.info.Cursor = max(e.info.Cursor, info.Cursor)
	e.online = info.Online
	e.heard = info.LastSeen
	r.n.add(e, 1)
	return wasOnline, true
}

// StoredCursors calls fn with each agent whose record in ax_agents, as
// this replica last read or wrote it, holds a command cursor above 0 (the
// highest the agent reported, at registration or in a heartbeat), with
// that cursor. fn runs under the registry's read lock: it must not call
// the registry.
func (r *Registry) StoredCursors(fn func(agent string, cursor uint64)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for id, e := range r.agents {
		if e.kvCursor > 0 && !e.info.Revoked {
			fn(id, e.kvCursor)
		}
	}
}

// Snapshot returns every agent sorted by id (O(agents)).
func (r *Registry) Snapshot() []protocol.AgentInfo {
	r.mu.RLock()
	out := make([]protocol.AgentInfo, 0, len(r.agents))
	for _, e := range r.agents {
		out = append(out, cloneAgent(e.info))
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, k int) bool { return out[i].Agent < out[k].Agent })
	return out
}

// OnlineIDs returns the agents online at now with offline-after after
// (IsOnline), in no order.
func (r *Registry) OnlineIDs(now time.Time, after time.Duration) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for id, e := range r.agents {
		if IsOnline(e.info, now, after) {
			out = append(out, id)
		}
	}
	return out
}

// sweep recomputes online flags at now and returns the agents that went
// offline, the online count and the count of known (not revoked) agents.
func (r *Registry) sweep(now time.Time, after time.Duration) (wentOffline []string, online, known int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.agents {
		if !e.info.Revoked && Registered(e.info) {
			known++
		}
		on := IsOnline(e.info, now, after)
		if e.online && !on {
			wentOffline = append(wentOffline, id)
		}
		e.online = on
		if on {
			online++
		}
	}
	sort.Strings(wentOffline)
	r.n = agentCounts{online: online, known: known}
	return wentOffline, online, known
}

// IsOnline reports whether agent a counts as online at now: not revoked,
// not stopped since it was last seen, and last seen within after
// (agent_offline_after).
func IsOnline(a protocol.AgentInfo, now time.Time, after time.Duration) bool {
	stopped := !a.StoppedAt.IsZero() && !a.StoppedAt.Before(a.LastSeen)
	return !a.Revoked && !stopped && !a.LastSeen.IsZero() && now.Sub(a.LastSeen) <= after
}

// Registered reports whether agent a has registered at least once (an
// enrolled agent has a record before).
func Registered(a protocol.AgentInfo) bool { return !a.RegisteredAt.IsZero() }
