package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// Shard ownership between controller replicas (docs/architecture.md: Leases and epochs).
//
// Every replica announces itself in ax_leases (replica.<node>, renewed every
// LeaseRenewInterval) and watches the bucket. The live replicas, sorted by
// node name, split the shards round-robin: shard n belongs to live[n mod
// len(live)], a fair share each. A replica works a shard — consumes its
// reports, owns its retry timers and the leases of its group jobs — only
// while it holds the lease shard.<n>:
//
//   - acquire: Create when the key is absent; a compare-and-set on the last
//     revision seen when the holder stopped renewing for LeaseTTL (it died)
//     or when the holder is this node's previous process (a restart);
//   - renew every LeaseRenewInterval, compare-and-set on its own revision;
//     a failed renewal means another replica took the shard: the worker
//     stops at once, its unacknowledged reports go to the new owner;
//   - release when the shard belongs to another live replica (one joined):
//     the worker drains what it pulled, then the key is deleted
//     (compare-and-set) and the new owner creates it.
//
// Every state write is a compare-and-set on the execution's revision, so a
// replica that lost a shard a moment ago cannot overwrite its new owner's
// writes; at worst a report or a retry is handled twice, and the second
// attempt is refused by the state machine or de-duplicated by Msg-Id.
//
// The ownership type (ownership.go, shardrelease.go) does this; what a
// shard's owner does with it (its report worker, its executions, its
// group leases) is ownershipHost's.

const whyStopping = "controller stopping"

// heldShard is a shard lease this replica holds.
type heldShard struct {
	rev     uint64
	since   time.Time
	renewed time.Time
	w       *shardWorker
}

// ownershipHost is what the ownership asks of the rest of the controller
// when this replica starts or stops working shards. Every method is called
// on the ownership loop, except reloadExecutions, which runs on a goroutine
// of its own (on the loop only in the first pass, run by Start).
type ownershipHost interface {
	// startShardWorker starts consuming the reports of shard n, newly held.
	startShardWorker(ctx context.Context, n int) (*shardWorker, error)
	// reloadExecutions reloads the state of the given newly worked shards:
	// retry timers, PENDING runs, unplaced executions, one-shot jobs whose
	// creation was cut short.
	reloadExecutions(ctx context.Context, shards map[int]bool) error
	// forgetShard drops the retry timers and group-lease bookkeeping of
	// shard n, no longer worked (its worker has stopped).
	forgetShard(n int)
	// manageGroupLeases grants, re-sends and moves the group leases of the
	// worked shards, once a pass; now is on the mono clock.
	manageGroupLeases(ctx context.Context, now time.Time)
	// placeWaiting places the PENDING executions waiting for an agent of
	// their group, once a pass; now is on the wall clock.
	placeWaiting(ctx context.Context, now time.Time)
}

// ownershipConfig is the ownership's part of the controller's Config.
type ownershipConfig struct {
	Node               string // names this replica in ax_leases
	Shards             int
	LeaseTTL           time.Duration
	LeaseRenewInterval time.Duration
}

// ownershipMetrics are the controller's metrics the ownership sets.
type ownershipMetrics struct {
	shardsOwned prometheus.Gauge
	takeovers   *prometheus.CounterVec // by kind; the ownership counts "shard"
}

// ownershipEnv is what the ownership is given at construction
// (newOwnership).
type ownershipEnv struct {
	cfg   ownershipConfig
	log   *slog.Logger
	m     ownershipMetrics
	clk   clock.Clock
	now   func() time.Time // the clock in UTC, as written to KV
	mono  func() time.Time // the clock lease durations are measured with
	goRun func(func(context.Context))
	// leases is the view of ax_leases, fed by the controller's watcher;
	// its changed channel wakes the loop.
	leases   *lease.View
	instance string    // this controller process, in its leases
	started  time.Time // when this process started (wall clock, in its leases)
}

// ownership holds this replica's shard leases and its presence in
// ax_leases, decides which shards it works (the rule above) and keeps
// them: it acquires, renews, hands over, drops and abandons the leases,
// and tells its host when a shard starts or stops being worked. It owns
// the held leases, the shards' report workers (started by the host, stopped
// here), the presence key and the ax_shards_owned gauge; the group leases
// of the worked shards are the host's, managed once a pass.
//
// Concurrency: one goroutine, the ownership loop (loop, started by start
// after it ran the first pass on the caller's goroutine), runs every pass
// and every release, and alone reads and writes the loop state below; it
// calls the host on itself, except reloadExecutions (on a goroutine of its
// own after the first pass, so that a long reload does not hold up the
// renewals). A pass's shard renewals are written in parallel, and a
// hand-over drains the workers in parallel, both awaited before the loop
// goes on. owned is the one thing other goroutines read (owns, ownsJob,
// ownedShards); shardOwners reads the lease view, which has its own lock.
// handOver, from Close, asks the loop to release everything and waits; a
// cancelled context makes it abandon the shards instead (a crash).
type ownership struct {
	*ownershipEnv
	host ownershipHost
	kv   jetstream.KeyValue // ax_leases, set by start

	// owned[n] publishes "this replica works shard n" to the rest of the
	// controller (report lanes, retries, group leases, retention).
	owned   []atomic.Bool
	running atomic.Bool   // the loop was started
	stop    chan struct{} // closed by handOver: the loop releases the shards
	done    chan struct{} // closed when the loop has returned

	// The loop's state.
	held         map[int]*heldShard
	lastPresence time.Time
	presenceRev  uint64
	// absentSince: when a shard was first seen without a holder, for the
	// fallback that takes a shard its designated owner leaves alone.
	absentSince map[int]time.Time
	newerSaid   bool // "a newer process runs under this node name" logged
	starting    bool // the first pass, run by start
	// startReload is the reload of the shards the first pass acquired,
	// run by start once the loop renews their leases.
	startReload func(context.Context)
}

// newOwnership returns the ownership of env, asking host for the rest.
func newOwnership(env ownershipEnv, host ownershipHost) *ownership {
	return &ownership{
		ownershipEnv: &env, host: host,
		owned: make([]atomic.Bool, env.cfg.Shards),
		stop:  make(chan struct{}), done: make(chan struct{}),
		held: map[int]*heldShard{}, absentSince: map[int]time.Time{},
	}
}

// start takes the free shards (all of them for a lone replica) in a
// first pass on the caller's goroutine, starts the loop that keeps them,
// and then reloads their executions on the caller's goroutine, so that
// start returns with the retry timers armed. The loop renews the leases
// meanwhile: the reload of 300,000 PENDING executions takes longer than a
// lease TTL on a loaded machine, and a reload that held up the renewals
// lost every shard it had just taken. leases is ax_leases.
func (o *ownership) start(ctx context.Context, leases jetstream.KeyValue) {
	o.kv = leases
	o.starting = true
	o.step(ctx)
	o.starting = false
	reload := o.startReload
	o.startReload = nil
	o.running.Store(true)
	o.goRun(o.loop)
	if reload != nil {
		reload(ctx)
	}
}

// handOver makes the loop hand every shard over (applying what their
// workers pulled) and remove the presence key, and waits for it, at most
// 15s. It does nothing when the loop was never started.
func (o *ownership) handOver() {
	if !o.running.Load() {
		return
	}
	close(o.stop)
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
		o.log.Warn("shards not released in 15s; stopping anyway")
	}
}

// owns reports whether this replica works shard n now.
func (o *ownership) owns(n int) bool {
	return n >= 0 && n < len(o.owned) && o.owned[n].Load()
}

// ownsJob reports whether this replica works the shard of job id.
func (o *ownership) ownsJob(id string) bool { return o.owns(o.shardOf(id)) }

// shardOf returns the shard of job id.
func (o *ownership) shardOf(id string) int { return protocol.Shard(id, o.cfg.Shards) }

// ownedShards returns the shards this replica works, ascending.
func (o *ownership) ownedShards() []int {
	var out []int
	for n := range o.owned {
		if o.owned[n].Load() {
			out = append(out, n)
		}
	}
	return out
}

// tick is how often the loop looks at leases: often enough that a
// lapsed group lease moves well within a second of its TTL.
func (o *ownership) tick() time.Duration {
	return min(max(o.cfg.LeaseTTL/20, 20*time.Millisecond), 250*time.Millisecond, o.cfg.LeaseRenewInterval)
}

// loop runs the shard and group-lease bookkeeping until ctx ends, then
// releases what it holds (a clean stop hands its shards over at once).
func (o *ownership) loop(ctx context.Context) {
	defer close(o.done)
	t := o.clk.NewTimer(o.tick())
	defer t.Stop()
	for {
		select {
		case <-o.stop: // Close: hand the shards over, applying what was pulled
			o.releaseAll()
			return
		case <-ctx.Done(): // a crash (abandon), or Close gave up waiting
			o.abandonShards()
			return
		case <-t.C():
		case <-o.leases.Changes():
		}
		o.step(ctx)
		t.Reset(o.tick())
	}
}

// step is one pass: presence, shard leases, group leases.
func (o *ownership) step(ctx context.Context) {
	now := o.mono()
	if now.Sub(o.lastPresence) >= o.cfg.LeaseRenewInterval {
		if err := o.renewPresence(ctx, now); err != nil {
			o.log.Warn("renew replica presence", "node", o.cfg.Node, "err", err)
		}
	}
	live := o.leases.LiveReplicas(now, o.cfg.LeaseTTL)
	if !slices.Contains(live, o.cfg.Node) {
		live = append(live, o.cfg.Node)
	}
	slices.Sort(live)
	var acquired, due, release []int
	for n := range o.cfg.Shards {
		want := live[n%len(live)] == o.cfg.Node
		if h, ok := o.held[n]; ok {
			if !want {
				release = append(release, n)
				continue
			}
			if now.Sub(h.renewed) >= o.cfg.LeaseRenewInterval {
				due = append(due, n)
			}
			continue
		}
		if o.tryAcquire(ctx, n, want, now) {
			acquired = append(acquired, n)
		}
	}
	if len(release) > 0 {
		o.releaseShards(ctx, release, "shares rebalanced over live replicas "+strings.Join(live, ","), o.cfg.LeaseRenewInterval)
	}
	if len(due) > 0 {
		o.renewShards(ctx, due, now)
	}
	if len(acquired) > 0 {
		o.shardsAcquired(ctx, acquired)
	}
	o.m.shardsOwned.Set(float64(len(o.held)))
	o.host.manageGroupLeases(ctx, now)
	o.host.placeWaiting(ctx, o.now())
}

func (o *ownership) renewPresence(ctx context.Context, now time.Time) error {
	data, err := json.Marshal(lease.Replica{Node: o.cfg.Node, Instance: o.instance, Started: o.started})
	if err != nil {
		return fmt.Errorf("encode replica presence: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, leaseWriteTimeout(o.cfg.LeaseTTL))
	defer cancel()
	rev, err := o.kv.Put(ctx, lease.ReplicaKey(o.cfg.Node), data)
	if err != nil {
		return err
	}
	o.lastPresence, o.presenceRev = now, rev
	return nil
}

// tryAcquire takes shard n when it is free (or lapsed, or this node's own
// from a previous process); without want only after it was left without
// a holder for a whole LeaseTTL (its designated owner is not taking it).
func (o *ownership) tryAcquire(ctx context.Context, n int, want bool, now time.Time) bool {
	cur, ok := o.leases.Shard(n)
	lapsed := ok && now.Sub(cur.Seen) >= o.cfg.LeaseTTL
	if !ok || lapsed {
		if _, seen := o.absentSince[n]; !seen {
			o.absentSince[n] = now
		}
	} else {
		delete(o.absentSince, n)
	}
	if want && ok && !lapsed && cur.Val.Node == o.cfg.Node && cur.Val.Instance == o.instance {
		// This process's own lease, from an acquisition whose answer was
		// lost (a timeout): adopt it.
		o.held[n] = &heldShard{rev: cur.Rev, since: cur.Val.Since, renewed: cur.Seen}
		delete(o.absentSince, n)
		o.log.Info("shard lease adopted (its acquisition's answer was lost)", "shard", n, "revision", cur.Rev)
		return true
	}
	// This node's previous process (a restart): take its shards at once,
	// but only from an older process — of two processes running under one
	// node name (a misconfiguration, an overlapping restart), the newer
	// works the shards and the older leaves them, instead of both taking
	// them from each other forever.
	mine := ok && cur.Val.Node == o.cfg.Node && cur.Val.Instance != o.instance && o.olderThanMe(cur.Val)
	if ok && !lapsed && cur.Val.Node == o.cfg.Node && cur.Val.Instance != o.instance && !mine && !o.newerSaid {
		o.newerSaid = true
		o.log.Error("another controller process runs under this node name and started later; it works the shards",
			"node", o.cfg.Node, "other_instance", cur.Val.Instance, "instance", o.instance)
	}
	if !want {
		since, seen := o.absentSince[n]
		if !seen || now.Sub(since) < o.cfg.LeaseTTL {
			return false
		}
	} else if ok && !lapsed && !mine {
		return false // held by a live replica: it releases when it sees us
	}
	val := lease.Shard{Shard: n, Node: o.cfg.Node, Instance: o.instance, Since: o.now(), Started: o.started}
	data, err := json.Marshal(val)
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, leaseWriteTimeout(o.cfg.LeaseTTL))
	defer cancel()
	var rev uint64
	if ok {
		rev, err = o.kv.Update(wctx, lease.ShardKey(n), data, cur.Rev)
		if isCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL, which the watcher does not report: then it is free.
			if _, gerr := o.kv.Get(wctx, lease.ShardKey(n)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = o.kv.Create(wctx, lease.ShardKey(n), data)
			}
		}
	} else {
		rev, err = o.kv.Create(wctx, lease.ShardKey(n), data)
	}
	if err != nil {
		if !isCASMiss(err) {
			o.log.Warn("acquire shard lease", "shard", n, "err", err)
		}
		return false
	}
	o.leases.PutShard(n, val, rev, now)
	delete(o.absentSince, n)
	o.held[n] = &heldShard{rev: rev, since: val.Since, renewed: now}
	if ok && cur.Val.Node != o.cfg.Node {
		o.m.takeovers.WithLabelValues("shard").Inc()
		o.log.Warn("shard lease taken over", "shard", n, "old_holder", cur.Val.Node, "old_instance", cur.Val.Instance,
			"new_holder", o.cfg.Node, "new_instance", o.instance, "old_revision", cur.Rev, "new_revision", rev,
			"since_last_renewal", now.Sub(cur.Seen))
	} else {
		o.log.Debug("shard lease acquired", "shard", n, "node", o.cfg.Node, "instance", o.instance, "revision", rev)
	}
	return true
}

// shardsAcquired starts the workers of newly held shards and reloads their
// state: retry timers of RETRY_WAITING executions, PENDING runs, unplaced
// executions and one-shot jobs whose creation was cut short.
func (o *ownership) shardsAcquired(ctx context.Context, ns []int) {
	set := map[int]bool{}
	for _, n := range ns {
		w, err := o.host.startShardWorker(ctx, n)
		if err != nil {
			o.log.Error("start shard worker; releasing the shard", "shard", n, "err", err)
			o.releaseShards(ctx, []int{n}, "its report worker did not start", 0)
			continue
		}
		o.held[n].w = w
		o.owned[n].Store(true)
		set[n] = true
	}
	if len(set) == 0 {
		return
	}
	o.log.Info("shards acquired", "shards", ns, "owned", len(o.held), "node", o.cfg.Node, "instance", o.instance)
	reload := func(ctx context.Context) {
		if err := o.host.reloadExecutions(ctx, set); err != nil && ctx.Err() == nil {
			o.log.Error("reload executions of acquired shards", "shards", ns, "err", err)
		}
	}
	if o.starting {
		o.startReload = reload // run by start, the loop renewing meanwhile
		return
	}
	// The reload scans every execution: not on this loop, which must keep
	// renewing leases meanwhile.
	o.goRun(reload)
}

// olderThanMe reports whether the process holding l started before this one.
func (o *ownership) olderThanMe(l lease.Shard) bool {
	if !l.Started.Equal(o.started) {
		return l.Started.Before(o.started)
	}
	return l.Instance < o.instance
}
