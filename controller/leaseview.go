package controller

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/kvfollow"
)

// Keys of KV ax_leases (bucket TTL = Config.LeaseTTL, History 1). Every
// write is a compare-and-set on the key's revision; a key nobody renews
// is removed by the bucket TTL.
//
//	replica.<node>  a controller replica's presence, renewed every LeaseRenewInterval
//	shard.<n>       the replica that works shard n (its reports, retries, group leases)
//	job.<job id>    the agent that holds a group job (mode any), with the epoch
const (
	keyReplicaPrefix = "replica."
	keyShardPrefix   = "shard."
	keyJobPrefix     = "job."
)

func replicaKey(node string) string { return keyReplicaPrefix + node }
func shardKey(n int) string         { return keyShardPrefix + strconv.Itoa(n) }
func jobLeaseKey(job string) string { return keyJobPrefix + job }

// replicaLease is the value of replica.<node>.
type replicaLease struct {
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
}

// shardLease is the value of shard.<n>.
type shardLease struct {
	Shard    int       `json:"shard"`
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
	// Started is when the holding process started: of two processes under
	// one node name, only the newer takes the other's shards.
	Started time.Time `json:"started"`
}

// groupLease is the value of job.<id>: the agent holding a group job.
// Epoch is the fencing token: it grows with every grant of the job (it is
// taken from the ax_leases stream sequence, which never goes back).
type groupLease struct {
	Job       string    `json:"job"`
	Agent     string    `json:"agent"`
	Epoch     uint64    `json:"epoch"`
	GrantedAt time.Time `json:"granted_at"`
	RenewedAt time.Time `json:"renewed_at,omitempty"`
	// Released: the holder stopped cleanly and handed the lease back; it
	// is never renewed again and moves at once.
	Released bool `json:"released,omitempty"`
}

// leaseSeen is the last revision of a key this replica saw and when (on
// its own monotonic clock, Controller.mono): a lease not renewed for
// LeaseTTL since then has lapsed.
type leaseSeen[T any] struct {
	val  T
	rev  uint64
	seen time.Time
}

// leaseView mirrors KV ax_leases in memory, fed by one watcher (every
// replica sees every renewal). The bucket TTL removes keys without an
// event, so "expired" is decided from seen + LeaseTTL, and a takeover is
// a compare-and-set on the revision last seen.
type leaseView struct {
	mu       sync.Mutex
	replicas map[string]leaseSeen[replicaLease]
	shards   map[int]leaseSeen[shardLease]
	jobs     map[string]leaseSeen[groupLease]
	// byAgent indexes jobs by holder (agent → job ids), so that listing
	// an agent's leases does not scan every group job (setJob, delJob).
	byAgent map[string]map[string]struct{}
	changed chan struct{} // a shard or replica key changed (capacity 1)
}

func newLeaseView() *leaseView {
	return &leaseView{
		replicas: map[string]leaseSeen[replicaLease]{},
		shards:   map[int]leaseSeen[shardLease]{},
		jobs:     map[string]leaseSeen[groupLease]{},
		byAgent:  map[string]map[string]struct{}{},
		changed:  make(chan struct{}, 1),
	}
}

func (v *leaseView) signal() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// apply records one watcher entry (a put, or a delete/purge).
func (v *leaseView) apply(e jetstream.KeyValueEntry, now time.Time) {
	key := e.Key()
	del := e.Operation() != jetstream.KeyValuePut
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case strings.HasPrefix(key, keyReplicaPrefix):
		node := key[len(keyReplicaPrefix):]
		var val replicaLease
		if del || json.Unmarshal(e.Value(), &val) != nil {
			delete(v.replicas, node)
		} else if cur, ok := v.replicas[node]; !ok || e.Revision() > cur.rev {
			v.replicas[node] = leaseSeen[replicaLease]{val: val, rev: e.Revision(), seen: now}
		}
		v.signal()
	case strings.HasPrefix(key, keyShardPrefix):
		n, err := strconv.Atoi(key[len(keyShardPrefix):])
		if err != nil {
			return
		}
		var val shardLease
		if del || json.Unmarshal(e.Value(), &val) != nil {
			delete(v.shards, n)
		} else if cur, ok := v.shards[n]; !ok || e.Revision() > cur.rev {
			v.shards[n] = leaseSeen[shardLease]{val: val, rev: e.Revision(), seen: now}
		}
		v.signal()
	case strings.HasPrefix(key, keyJobPrefix):
		id := key[len(keyJobPrefix):]
		var val groupLease
		if del || json.Unmarshal(e.Value(), &val) != nil {
			v.delJob(id)
		} else if cur, ok := v.jobs[id]; !ok || e.Revision() > cur.rev {
			v.setJob(id, leaseSeen[groupLease]{val: val, rev: e.Revision(), seen: now})
		}
	}
}

// putShard, putJob and putReplica record this replica's own successful
// writes at once (the watcher confirms them later).
func (v *leaseView) putShard(n int, val shardLease, rev uint64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.shards[n]; !ok || rev > cur.rev {
		v.shards[n] = leaseSeen[shardLease]{val: val, rev: rev, seen: now}
	}
}

func (v *leaseView) putJob(id string, val groupLease, rev uint64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[id]; !ok || rev > cur.rev {
		v.setJob(id, leaseSeen[groupLease]{val: val, rev: rev, seen: now})
	}
}

// setJob records job id's lease l and keeps byAgent in step (v.mu held).
func (v *leaseView) setJob(id string, l leaseSeen[groupLease]) {
	if cur, ok := v.jobs[id]; ok && cur.val.Agent != l.val.Agent {
		v.unindex(id, cur.val.Agent)
	}
	v.jobs[id] = l
	set := v.byAgent[l.val.Agent]
	if set == nil {
		set = map[string]struct{}{}
		v.byAgent[l.val.Agent] = set
	}
	set[id] = struct{}{}
}

// delJob forgets job id's lease (v.mu held).
func (v *leaseView) delJob(id string) {
	if cur, ok := v.jobs[id]; ok {
		v.unindex(id, cur.val.Agent)
		delete(v.jobs, id)
	}
}

func (v *leaseView) unindex(id, agent string) {
	if set := v.byAgent[agent]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(v.byAgent, agent)
		}
	}
}

func (v *leaseView) dropJob(id string, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[id]; ok && cur.rev <= rev {
		v.delJob(id)
	}
}

func (v *leaseView) dropShard(n int, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.shards[n]; ok && cur.rev <= rev {
		delete(v.shards, n)
	}
}

func (v *leaseView) shard(n int) (leaseSeen[shardLease], bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.shards[n]
	return s, ok
}

func (v *leaseView) job(id string) (leaseSeen[groupLease], bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.jobs[id]
	return s, ok
}

// jobIDs returns the ids of the group leases known.
func (v *leaseView) jobIDs() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.jobs))
	for id := range v.jobs {
		out = append(out, id)
	}
	return out
}

// liveReplicas returns the nodes whose presence was renewed within ttl of now.
func (v *leaseView) liveReplicas(now time.Time, ttl time.Duration) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for node, r := range v.replicas {
		if now.Sub(r.seen) < ttl {
			out = append(out, node)
		}
	}
	return out
}

// heldBy returns the group leases (job → epoch) held by agent that have
// not lapsed at now.
func (v *leaseView) heldBy(agent string, now time.Time, ttl time.Duration) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]uint64{}
	for id := range v.byAgent[agent] {
		if l := v.jobs[id]; now.Sub(l.seen) < ttl {
			out[id] = l.val.Epoch
		}
	}
	return out
}

// followLeases loads ax_leases into the view and keeps it current.
func (c *core) followLeases(ctx context.Context) error {
	w, err := c.kv.Leases.WatchAll(c.ctx)
	if err != nil {
		return err
	}
	return kvfollow.Follow(ctx, w, func(e jetstream.KeyValueEntry) { c.leases.apply(e, c.mono()) }, 1, c.goRun)
}
