package lease

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
// The Ownership type (ownership.go, shardrelease.go) does this; what a
// shard's owner does with it (its report worker, its executions, its
// group leases) is its OwnershipHost's.

const whyStopping = "controller stopping"

// heldShard is a shard lease this replica holds.
type heldShard struct {
	rev   uint64
	since time.Time
	w     ShardWorker // nil until the host started the shard's worker
}

// ShardWorker is a shard's report worker as the ownership sees it: its
// host starts one for each newly held shard (OwnershipHost.StartShardWorker),
// and the ownership stops it when the shard is released, lost or abandoned.
type ShardWorker interface {
	// Stop ends the worker and waits for it. With drain (a hand-over) the
	// reports already pulled are applied first, for at most drainMax;
	// without (the lease was lost, a crash), or past drainMax, they are
	// left unacknowledged for the next owner.
	Stop(drain bool, drainMax time.Duration)
}

// OwnershipHost is what the ownership asks of the rest of the controller
// when this replica starts or stops working shards. Every method is called
// on the ownership loop, except ReloadExecutions, which runs on a goroutine
// of its own (on the loop only in the first pass, run by Start).
type OwnershipHost interface {
	// StartShardWorker starts consuming the reports of shard n, newly held.
	StartShardWorker(ctx context.Context, n int) (ShardWorker, error)
	// ReloadExecutions reloads the state of the given newly worked shards:
	// retry timers, PENDING runs, unplaced executions, one-shot jobs whose
	// creation was cut short.
	ReloadExecutions(ctx context.Context, shards map[int]bool) error
	// ForgetShard drops the retry timers and group-lease bookkeeping of
	// shard n, no longer worked (its worker has stopped).
	ForgetShard(n int)
	// ManageGroupLeases grants, re-sends and moves the group leases of the
	// worked shards, once a pass; now is on the mono clock.
	ManageGroupLeases(ctx context.Context, now time.Time)
	// PlaceWaiting places the PENDING executions waiting for an agent of
	// their group, once a pass; now is on the wall clock.
	PlaceWaiting(ctx context.Context, now time.Time)
}

// OwnershipConfig is the ownership's part of the controller's Config.
type OwnershipConfig struct {
	Node               string        // names this replica in ax_leases
	Shards             int           // the shard count (protocol.Shard's)
	LeaseTTL           time.Duration // a lease not renewed for this long has lapsed
	LeaseRenewInterval time.Duration // how often the presence and shard leases are renewed
}

// OwnershipMetrics are the controller's metrics the ownership sets.
type OwnershipMetrics struct {
	ShardsOwned prometheus.Gauge       // ax_shards_owned
	Takeovers   *prometheus.CounterVec // by kind; the ownership counts "shard"
}

// OwnershipEnv is what the ownership is given at construction
// (NewOwnership).
type OwnershipEnv struct {
	Config  OwnershipConfig
	Log     *slog.Logger
	Metrics OwnershipMetrics
	Clock   clock.Clock      // the loop's timer
	Now     func() time.Time // the clock in UTC, as written to KV
	Mono    func() time.Time // the clock lease durations are measured with
	// GoRun runs a function on a goroutine the controller tracks (its
	// context ends with the controller): the loop and the reloads.
	GoRun func(func(context.Context))
	// Leases is the view of ax_leases, fed by the controller's watcher;
	// its Changes channel wakes the loop.
	Leases   *View
	Instance string    // this controller process, in its leases
	Started  time.Time // when this process started (wall clock, in its leases)
}

// Ownership holds this replica's shard leases and its presence in
// ax_leases, decides which shards it works (the rule of the package doc)
// and keeps them: it acquires, renews, hands over, drops and abandons the
// leases, and tells its host when a shard starts or stops being worked. It
// owns the held leases, the shards' report workers (started by the host,
// stopped here), the presence key and the ax_shards_owned gauge; the group
// leases of the worked shards are the host's, managed once a pass.
//
// Concurrency: one goroutine, the ownership loop (loop, started by Start
// after it ran the first pass on the caller's goroutine), runs every pass
// and every release, and alone reads and writes the loop state below; it
// calls the host on itself, except ReloadExecutions (on a goroutine of its
// own after the first pass, so that a long reload does not hold up the
// renewals). A pass's shard renewals are written in parallel, and a
// hand-over drains the workers in parallel, both awaited before the loop
// goes on. owned is the one thing other goroutines read (Owns, OwnsJob,
// OwnedShards); ShardOwners reads the lease view, which has its own lock.
// HandOver, from Close, asks the loop to release everything and waits; a
// cancelled context makes it abandon the shards instead (a crash).
type Ownership struct {
	// What NewOwnership was given (OwnershipEnv), read-only.
	cfg      OwnershipConfig
	log      *slog.Logger
	m        OwnershipMetrics
	clk      clock.Clock
	now      func() time.Time
	mono     func() time.Time
	goRun    func(func(context.Context))
	leases   *View
	instance string
	started  time.Time

	host OwnershipHost
	kv   jetstream.KeyValue // ax_leases, set by Start

	// owned[n] publishes "this replica works shard n" to the rest of the
	// controller (report lanes, retries, group leases, retention).
	owned []atomic.Bool
	// renewed[n] is when shard n's lease was last acquired or renewed,
	// on the mono clock, as nanoseconds since base: written by the loop,
	// read by it (sinceRenewed) and by OwnsJobSurely.
	renewed []atomic.Int64
	base    time.Time
	running atomic.Bool   // the loop was started
	stop    chan struct{} // closed by HandOver: the loop releases the shards
	done    chan struct{} // closed when the loop has returned

	// The loop's state.
	held         map[int]*heldShard
	lastPresence time.Time
	presenceRev  uint64
	// absentSince: when a shard was first seen without a holder, for the
	// fallback that takes a shard its designated owner leaves alone.
	absentSince map[int]time.Time
	newerSaid   bool // "a newer process runs under this node name" logged
	starting    bool // the first pass, run by Start
	// startReload is the reload of the shards the first pass acquired,
	// run by Start once the loop renews their leases.
	startReload func(context.Context)
}

// NewOwnership returns the ownership of env, asking host for the rest. It
// does no I/O; Start begins the work.
func NewOwnership(env OwnershipEnv, host OwnershipHost) *Ownership {
	return &Ownership{
		cfg: env.Config, log: env.Log, m: env.Metrics, clk: env.Clock,
		now: env.Now, mono: env.Mono, goRun: env.GoRun, leases: env.Leases,
		instance: env.Instance, started: env.Started,
		host:  host,
		owned: make([]atomic.Bool, env.Config.Shards), renewed: make([]atomic.Int64, env.Config.Shards), base: env.Mono(),
		stop: make(chan struct{}), done: make(chan struct{}),
		held: map[int]*heldShard{}, absentSince: map[int]time.Time{},
	}
}

// Start takes the free shards (all of them for a lone replica) in a
// first pass on the caller's goroutine, starts the loop that keeps them,
// and then reloads their executions on the caller's goroutine, so that
// Start returns with the retry timers armed. The loop renews the leases
// meanwhile: the reload of 300,000 PENDING executions takes longer than a
// lease TTL on a loaded machine, and a reload that held up the renewals
// lost every shard it had just taken. leases is ax_leases. Call it once.
func (o *Ownership) Start(ctx context.Context, leases jetstream.KeyValue) {
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

// HandOver makes the loop hand every shard over (applying what their
// workers pulled) and remove the presence key, and waits for it, at most
// 15s. It does nothing when the loop was never started; call it once.
func (o *Ownership) HandOver() {
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

// Owns reports whether this replica works shard n now.
func (o *Ownership) Owns(n int) bool {
	return n >= 0 && n < len(o.owned) && o.owned[n].Load()
}

// OwnsJob reports whether this replica works the shard of job id.
func (o *Ownership) OwnsJob(id string) bool { return o.Owns(o.ShardOf(id)) }

// OwnsJobSurely reports whether this replica works the shard of job id and
// acquired or renewed its lease within LeaseTTL − LeaseRenewInterval (the
// margin after which the loop stops a shard it could not renew). A process
// that was frozen or cut off for longer still says it works a shard until
// its loop has found out, while another replica may have taken it.
func (o *Ownership) OwnsJobSurely(id string) bool {
	n := o.ShardOf(id)
	if !o.Owns(n) {
		return false
	}
	return o.sinceRenewed(n, o.mono()) < o.cfg.LeaseTTL-o.cfg.LeaseRenewInterval
}

// sinceRenewed returns how long before now (on the mono clock) shard n's
// lease was last acquired or renewed.
func (o *Ownership) sinceRenewed(n int, now time.Time) time.Duration {
	return now.Sub(o.base) - time.Duration(o.renewed[n].Load())
}

// noteRenewed records, for OwnsJobSurely, that shard n's lease was
// acquired or renewed at t (on the mono clock).
func (o *Ownership) noteRenewed(n int, t time.Time) {
	o.renewed[n].Store(int64(t.Sub(o.base)))
}

// ShardOf returns the shard of job id.
func (o *Ownership) ShardOf(id string) int { return protocol.Shard(id, o.cfg.Shards) }

// OwnedShards returns the shards this replica works, ascending.
func (o *Ownership) OwnedShards() []int {
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
func (o *Ownership) tick() time.Duration {
	return min(max(o.cfg.LeaseTTL/20, 20*time.Millisecond), 250*time.Millisecond, o.cfg.LeaseRenewInterval)
}

// loop runs the shard and group-lease bookkeeping until ctx ends, then
// releases what it holds (a clean stop hands its shards over at once).
func (o *Ownership) loop(ctx context.Context) {
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
func (o *Ownership) step(ctx context.Context) {
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
		if _, ok := o.held[n]; ok {
			if !want {
				release = append(release, n)
				continue
			}
			if o.sinceRenewed(n, now) >= o.cfg.LeaseRenewInterval {
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
	o.m.ShardsOwned.Set(float64(len(o.held)))
	o.host.ManageGroupLeases(ctx, now)
	o.host.PlaceWaiting(ctx, o.now())
}

func (o *Ownership) renewPresence(ctx context.Context, now time.Time) error {
	data, err := json.Marshal(Replica{Node: o.cfg.Node, Instance: o.instance, Started: o.started})
	if err != nil {
		return fmt.Errorf("encode replica presence: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout(o.cfg.LeaseTTL))
	defer cancel()
	rev, err := o.kv.Put(ctx, ReplicaKey(o.cfg.Node), data)
	if err != nil {
		return err
	}
	o.lastPresence, o.presenceRev = now, rev
	return nil
}

// tryAcquire takes shard n when it is free (or lapsed, or this node's own
// from a previous process); without want only after it was left without
// a holder for a whole LeaseTTL (its designated owner is not taking it).
func (o *Ownership) tryAcquire(ctx context.Context, n int, want bool, now time.Time) bool {
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
		o.held[n] = &heldShard{rev: cur.Rev, since: cur.Val.Since}
		o.noteRenewed(n, cur.Seen)
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
	val := Shard{Shard: n, Node: o.cfg.Node, Instance: o.instance, Since: o.now(), Started: o.started}
	data, err := json.Marshal(val)
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout(o.cfg.LeaseTTL))
	defer cancel()
	var rev uint64
	if ok {
		rev, err = o.kv.Update(wctx, ShardKey(n), data, cur.Rev)
		if IsCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL, which the watcher does not report: then it is free.
			if _, gerr := o.kv.Get(wctx, ShardKey(n)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = o.kv.Create(wctx, ShardKey(n), data)
			}
		}
	} else {
		rev, err = o.kv.Create(wctx, ShardKey(n), data)
	}
	if err != nil {
		if !IsCASMiss(err) {
			o.log.Warn("acquire shard lease", "shard", n, "err", err)
		}
		return false
	}
	o.leases.PutShard(n, val, rev, now)
	delete(o.absentSince, n)
	o.held[n] = &heldShard{rev: rev, since: val.Since}
	o.noteRenewed(n, now)
	if ok && cur.Val.Node != o.cfg.Node {
		o.m.Takeovers.WithLabelValues("shard").Inc()
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
func (o *Ownership) shardsAcquired(ctx context.Context, ns []int) {
	set := map[int]bool{}
	for _, n := range ns {
		w, err := o.host.StartShardWorker(ctx, n)
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
		if err := o.host.ReloadExecutions(ctx, set); err != nil && ctx.Err() == nil {
			o.log.Error("reload executions of acquired shards", "shards", ns, "err", err)
		}
	}
	if o.starting {
		o.startReload = reload // run by Start, the loop renewing meanwhile
		return
	}
	// The reload scans every execution: not on this loop, which must keep
	// renewing leases meanwhile.
	o.goRun(reload)
}

// olderThanMe reports whether the process holding l started before this one.
func (o *Ownership) olderThanMe(l Shard) bool {
	if !l.Started.Equal(o.started) {
		return l.Started.Before(o.started)
	}
	return l.Instance < o.instance
}
