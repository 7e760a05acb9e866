package lease

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Keys of KV ax_leases (bucket TTL = Config.LeaseTTL, History 1). Every
// write is a compare-and-set on the key's revision; a key nobody renews
// is removed by the bucket TTL.
//
//	replica.<node>  a controller replica's presence, renewed every LeaseRenewInterval
//	shard.<n>       the replica that works shard n (its reports, retries, group leases)
//	job.<job id>    the agent that holds a group job (mode any), with the epoch
const (
	KeyReplicaPrefix = "replica."
	KeyShardPrefix   = "shard."
	KeyJobPrefix     = "job."
)

// ReplicaKey is the key of replica node's presence.
func ReplicaKey(node string) string { return KeyReplicaPrefix + node }

// ShardKey is the key of shard n's lease.
func ShardKey(n int) string { return KeyShardPrefix + strconv.Itoa(n) }

// JobKey is the key of group job job's lease.
func JobKey(job string) string { return KeyJobPrefix + job }

// Replica is the value of replica.<node>.
type Replica struct {
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
}

// Shard is the value of shard.<n>.
type Shard struct {
	Shard    int       `json:"shard"`
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
	// Started is when the holding process started: of two processes under
	// one node name, only the newer takes the other's shards.
	Started time.Time `json:"started"`
}

// Group is the value of job.<id>: the agent holding a group job.
// Epoch is the fencing token: it grows with every grant of the job (it is
// taken from the ax_leases stream sequence, which never goes back).
type Group struct {
	Job       string    `json:"job"`
	Agent     string    `json:"agent"`
	Epoch     uint64    `json:"epoch"`
	GrantedAt time.Time `json:"granted_at"`
	RenewedAt time.Time `json:"renewed_at,omitempty"`
	// Released: the holder stopped cleanly and handed the lease back; it
	// is never renewed again and moves at once.
	Released bool `json:"released,omitempty"`
}

// Seen is the last revision of a key this replica saw and when (on
// its own monotonic clock): a lease not renewed for
// LeaseTTL since then has lapsed.
type Seen[T any] struct {
	Val  T
	Rev  uint64
	Seen time.Time
}

// View mirrors KV ax_leases in memory, fed by one watcher (every
// replica sees every renewal). The bucket TTL removes keys without an
// event, so "expired" is decided from seen + LeaseTTL, and a takeover is
// a compare-and-set on the revision last seen.
type View struct {
	mu       sync.Mutex
	replicas map[string]Seen[Replica]
	shards   map[int]Seen[Shard]
	jobs     map[string]Seen[Group]
	// byAgent indexes jobs by holder (agent → job ids), so that listing
	// an agent's leases does not scan every group job (setJob, delJob).
	byAgent map[string]map[string]struct{}
	changes chan struct{} // a shard or replica key changed (capacity 1)
}

// NewView returns an empty view.
func NewView() *View {
	return &View{
		replicas: map[string]Seen[Replica]{},
		shards:   map[int]Seen[Shard]{},
		jobs:     map[string]Seen[Group]{},
		byAgent:  map[string]map[string]struct{}{},
		changes:  make(chan struct{}, 1),
	}
}

// Changes receives a value after a shard or replica key changed (one
// pending at most).
func (v *View) Changes() <-chan struct{} { return v.changes }

// Signal says on Changes that a shard or replica key changed (a send
// that never blocks: one pending signal is enough).
func (v *View) Signal() {
	select {
	case v.changes <- struct{}{}:
	default:
	}
}

// Apply records one watcher entry (a put, or a delete/purge).
func (v *View) Apply(e jetstream.KeyValueEntry, now time.Time) {
	key := e.Key()
	del := e.Operation() != jetstream.KeyValuePut
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case strings.HasPrefix(key, KeyReplicaPrefix):
		node := key[len(KeyReplicaPrefix):]
		var val Replica
		if del || json.Unmarshal(e.Value(), &val) != nil {
			delete(v.replicas, node)
		} else if cur, ok := v.replicas[node]; !ok || e.Revision() > cur.Rev {
			v.replicas[node] = Seen[Replica]{Val: val, Rev: e.Revision(), Seen: now}
		}
		v.Signal()
	case strings.HasPrefix(key, KeyShardPrefix):
		n, err := strconv.Atoi(key[len(KeyShardPrefix):])
		if err != nil {
			return
		}
		var val Shard
		if del || json.Unmarshal(e.Value(), &val) != nil {
			delete(v.shards, n)
		} else if cur, ok := v.shards[n]; !ok || e.Revision() > cur.Rev {
			v.shards[n] = Seen[Shard]{Val: val, Rev: e.Revision(), Seen: now}
		}
		v.Signal()
	case strings.HasPrefix(key, KeyJobPrefix):
		id := key[len(KeyJobPrefix):]
		var val Group
		if del || json.Unmarshal(e.Value(), &val) != nil {
			v.delJob(id)
		} else if cur, ok := v.jobs[id]; !ok || e.Revision() > cur.Rev {
			v.setJob(id, Seen[Group]{Val: val, Rev: e.Revision(), Seen: now})
		}
	}
}

// PutShard and PutJob record this replica's own successful writes at
// once (the watcher confirms them later).
func (v *View) PutShard(n int, val Shard, rev uint64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.shards[n]; !ok || rev > cur.Rev {
		v.shards[n] = Seen[Shard]{Val: val, Rev: rev, Seen: now}
	}
}

// PutJob is PutShard for group job id's lease.
func (v *View) PutJob(id string, val Group, rev uint64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[id]; !ok || rev > cur.Rev {
		v.setJob(id, Seen[Group]{Val: val, Rev: rev, Seen: now})
	}
}

// setJob records job id's lease l and keeps byAgent in step (v.mu held).
func (v *View) setJob(id string, l Seen[Group]) {
	if cur, ok := v.jobs[id]; ok && cur.Val.Agent != l.Val.Agent {
		v.unindex(id, cur.Val.Agent)
	}
	v.jobs[id] = l
	set := v.byAgent[l.Val.Agent]
	if set == nil {
		set = map[string]struct{}{}
		v.byAgent[l.Val.Agent] = set
	}
	set[id] = struct{}{}
}

// delJob forgets job id's lease (v.mu held).
func (v *View) delJob(id string) {
	if cur, ok := v.jobs[id]; ok {
		v.unindex(id, cur.Val.Agent)
		delete(v.jobs, id)
	}
}

func (v *View) unindex(id, agent string) {
	if set := v.byAgent[agent]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(v.byAgent, agent)
		}
	}
}

// DropJob forgets job id's lease if the view holds it at rev or older
// (this replica deleted it at rev).
func (v *View) DropJob(id string, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[id]; ok && cur.Rev <= rev {
		v.delJob(id)
	}
}

// DropShard is DropJob for shard n's lease.
func (v *View) DropShard(n int, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.shards[n]; ok && cur.Rev <= rev {
		delete(v.shards, n)
	}
}

// Shard returns shard n's lease as last seen.
func (v *View) Shard(n int) (Seen[Shard], bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.shards[n]
	return s, ok
}

// Job returns group job id's lease as last seen.
func (v *View) Job(id string) (Seen[Group], bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.jobs[id]
	return s, ok
}

// JobIDs returns the ids of the group leases known.
func (v *View) JobIDs() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.jobs))
	for id := range v.jobs {
		out = append(out, id)
	}
	return out
}

// LiveReplicas returns the nodes whose presence was renewed within ttl of now.
func (v *View) LiveReplicas(now time.Time, ttl time.Duration) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for node, r := range v.replicas {
		if now.Sub(r.Seen) < ttl {
			out = append(out, node)
		}
	}
	return out
}

// LiveInstance reports whether the process instance of node renewed its
// presence less than ttl before now: a replica restarted under the same
// node is a new instance, and the old one is not live.
func (v *View) LiveInstance(node, instance string, now time.Time, ttl time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.replicas[node]
	return ok && r.Val.Instance == instance && now.Sub(r.Seen) < ttl
}

// HeldBy returns the group leases (job → epoch) held by agent that have
// not lapsed at now.
func (v *View) HeldBy(agent string, now time.Time, ttl time.Duration) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]uint64{}
	for id := range v.byAgent[agent] {
		if l := v.jobs[id]; now.Sub(l.Seen) < ttl {
			out[id] = l.Val.Epoch
		}
	}
	return out
}
