package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Liveness digests: how the replicas, and a restarted replica, learn of
// the heartbeats another replica answered from memory, without a write to
// ax_agents per heartbeat.
//
// Every replica keeps, per agent, the time it last answered one of its
// heartbeats itself (agentEntry.heard). Every livenessDigestEvery it
// writes the liveness (last seen, heartbeat time, stats, clock offset) of
// every agent it answered within agent_offline_after, and whose record in
// ax_agents is behind it, into bucket ax_liveness: livenessChunks keys
// "<node>.<k>", agent ids spread over them by hash so that one value
// stays small (about 150 bytes an agent: 10,000 agents are 64 values of
// about 24 KB). Every replica watches the bucket and keeps, per agent, the
// latest liveness it reads there (Registry.seenElsewhere), unless
// the agent registered again since (another boot) or was revoked.
//
// ax_agents is then written on what changes an agent's state (registered,
// came online, first heartbeat, stopping, lease claims, labels,
// revocation) and refreshed at most every storedLivenessRefresh, instead
// of every agent_offline_after less one and a half heartbeats: at 10,000
// agents that was over a thousand writes a second, each stored by
// JetStream and delivered to every replica's watch. The digest is 64
// writes per replica every few seconds whatever the fleet's size.
//
// The keys are named by node (unique per replica), so that a restarted
// replica overwrites its own; each value names the process that wrote it
// (its instance), so that a replica skips its own values and a restarted
// one reads those of the process before it. The bucket keeps a key for
// streams.LivenessTTL (a stopped replica's keys then go away); its values
// are times, so an old one never makes an agent look online longer than
// its own last heartbeat does.

// livenessChunks is how many keys one replica's digest is spread over.
const livenessChunks = 64

// storedLivenessRefresh is the longest an online agent's last-seen time
// in ax_agents is left behind its heartbeats (the digests carry it
// meanwhile).
const storedLivenessRefresh = 10 * time.Minute

// digestEntry is one agent's liveness in a digest.
type digestEntry struct {
	// Boot is the agent process the heartbeats came from: an entry of an
	// earlier boot is not applied to a newer registration.
	Boot        string            `json:"b,omitempty"`
	LastSeen    time.Time         `json:"s"`
	HeartbeatAt time.Time         `json:"h"`
	Stats       protocol.Stats    `json:"t"`
	ClockOffset protocol.Duration `json:"o,omitempty"`
}

// livenessDigest is one value of ax_liveness.
type livenessDigest struct {
	V int `json:"v"`
	// Instance is the controller process that wrote it.
	Instance string                 `json:"instance"`
	Agents   map[string]digestEntry `json:"agents"`
}

// decodeDigest decodes and checks one value of ax_liveness.
func decodeDigest(data []byte) (livenessDigest, error) {
	var d livenessDigest
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%w: %v", errBadDigest, err)
	}
	if d.V != 1 {
		return d, fmt.Errorf("%w: v: want 1, got %d", errBadDigest, d.V)
	}
	for id, e := range d.Agents {
		if err := protocol.ValidateName("agent", id); err != nil {
			return d, fmt.Errorf("%w: agent %q: %v", errBadDigest, id, err)
		}
		if e.LastSeen.IsZero() {
			return d, fmt.Errorf("%w: agent %q: last seen: missing", errBadDigest, id)
		}
	}
	return d, nil
}

// livenessDigestEvery is how often a replica writes its digest: half of
// livenessRefresh, so that another replica reads an agent's liveness well
// within agent_offline_after of its heartbeat.
func (s *agentStore) livenessDigestEvery() time.Duration {
	return max(s.livenessRefresh()/2, 10*time.Millisecond)
}

// digestChunk returns the chunk of agent id.
func digestChunk(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % livenessChunks)
}

// digests returns this replica's digest values, by chunk, at now: the
// agents it answered within after whose stored record is behind.
func (r *Registry) digests(instance string, now time.Time, after time.Duration) map[int]livenessDigest {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[int]livenessDigest{}
	for id, e := range r.agents {
		if e.heard.IsZero() || now.Sub(e.heard) > after || !e.info.LastSeen.After(e.kvSeen) || e.info.Revoked {
			continue
		}
		k := digestChunk(id)
		d, ok := out[k]
		if !ok {
			d = livenessDigest{V: 1, Instance: instance, Agents: map[string]digestEntry{}}
			out[k] = d
		}
		d.Agents[id] = digestEntry{Boot: e.info.Boot, LastSeen: e.info.LastSeen, HeartbeatAt: e.info.HeartbeatAt,
			Stats: e.info.Stats, ClockOffset: e.info.ClockOffset}
	}
	return out
}

// seenElsewhere records liveness d of agent id read from another
// replica's digest, if it is later than what is known here and of the
// agent's current boot. It returns whether it was applied.
func (r *Registry) seenElsewhere(id string, d digestEntry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[id]
	if !ok || e.info.Revoked || e.info.Boot != d.Boot || !d.LastSeen.After(e.info.LastSeen) {
		return false
	}
	if !e.info.StoppedAt.IsZero() && !d.LastSeen.After(e.info.StoppedAt) {
		return false
	}
	r.n.add(e, -1)
	e.info.LastSeen, e.info.HeartbeatAt, e.info.Stats, e.info.ClockOffset = d.LastSeen, d.HeartbeatAt, d.Stats, d.ClockOffset
	e.info.StoppedAt, e.info.Online = time.Time{}, true
	r.n.add(e, 1)
	return true
}

// writeDigest writes this replica's liveness digest to ax_liveness.
func (s *agentStore) writeDigest(ctx context.Context) error {
	var errs []error
	for k, d := range s.agents.digests(s.instance, s.now(), s.cfg.AgentOfflineAfter) {
		data, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("liveness digest: %w", err)
		}
		if _, err := s.kv.Liveness.Put(ctx, s.cfg.Node+"."+strconv.Itoa(k), data); err != nil {
			errs = append(errs, fmt.Errorf("liveness digest %d: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// digestLoop writes this replica's liveness digest every
// livenessDigestEvery.
func (s *agentStore) digestLoop(ctx context.Context) {
	if s.storedRefresh() == 0 {
		return // every heartbeat is written to ax_agents
	}
	s.every(ctx, s.livenessDigestEvery(), s.livenessDigestEvery(), "liveness digest", s.writeDigest)
}

// followLiveness reads the digests in ax_liveness into the registry
// before returning (the agents must be loaded), then keeps following
// the other replicas' digests.
func (s *agentStore) followLiveness(ctx context.Context) error {
	w, err := s.kv.Liveness.WatchAll(s.ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("watch %s: %w", protocol.BucketLiveness, err)
	}
	apply := func(e jetstream.KeyValueEntry) {
		d, err := decodeDigest(e.Value())
		if err != nil {
			s.log.Error("liveness digest ignored", "key", e.Key(), "err", err)
			return
		}
		if d.Instance == s.instance {
			return // this process's own
		}
		for id, de := range d.Agents {
			if s.agents.seenElsewhere(id, de) {
				s.m.agentStats(id, de.Stats)
			}
		}
	}
	return s.follow(ctx, w, apply)
}
