package controller

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
// One goroutine (ownershipLoop) owns the held shards and the group-lease
// bookkeeping; owned[n] publishes "this replica works shard n" to the
// others (report lanes, retries).

const whyStopping = "controller stopping"

// heldShard is a shard lease this replica holds.
type heldShard struct {
	rev     uint64
	since   time.Time
	renewed time.Time
	w       *shardWorker
}

// ownership is the state of ownershipLoop.
type ownership struct {
	held         map[int]*heldShard
	lastPresence time.Time
	presenceRev  uint64
	// absentSince: when a shard was first seen without a holder, for the
	// fallback that takes a shard its designated owner leaves alone.
	absentSince map[int]time.Time
	groups      groupState
	newerSaid   bool // "a newer process runs under this node name" logged
	starting    bool // the first pass, run by Start
}

func newOwnership() *ownership {
	return &ownership{held: map[int]*heldShard{}, absentSince: map[int]time.Time{}, groups: newGroupState()}
}

// owns reports whether this replica works shard n now.
func (c *Controller) owns(n int) bool {
	return n >= 0 && n < len(c.owned) && c.owned[n].Load()
}

// ownsJob reports whether this replica works the shard of job id.
func (c *Controller) ownsJob(id string) bool { return c.owns(c.shardOfJob(id)) }

func (c *Controller) shardOfJob(id string) int { return protocol.Shard(id, c.cfg.Shards) }

// ownedShards returns the shards this replica works, ascending.
func (c *Controller) ownedShards() []int {
	var out []int
	for n := range c.owned {
		if c.owned[n].Load() {
			out = append(out, n)
		}
	}
	return out
}

// ownershipTick is how often the loop looks at leases: often enough that a
// lapsed group lease moves well within a second of its TTL.
func (c *Controller) ownershipTick() time.Duration {
	return min(max(c.cfg.LeaseTTL/20, 20*time.Millisecond), 250*time.Millisecond, c.cfg.LeaseRenewInterval)
}

// ownershipLoop runs the shard and group-lease bookkeeping until ctx ends,
// then releases what it holds (a clean stop hands its shards over at once).
func (c *Controller) ownershipLoop(ctx context.Context) {
	defer close(c.ownDone)
	t := c.clk.NewTimer(c.ownershipTick())
	defer t.Stop()
	for {
		select {
		case <-c.ownStop: // Close: hand the shards over, applying what was pulled
			c.releaseAll()
			return
		case <-ctx.Done(): // a crash (abandon), or Close gave up waiting
			c.abandonShards()
			return
		case <-t.C():
		case <-c.leases.changed:
		}
		c.ownershipStep(ctx)
		t.Reset(c.ownershipTick())
	}
}

// ownershipStep is one pass: presence, shard leases, group leases.
func (c *Controller) ownershipStep(ctx context.Context) {
	o := c.own
	now := c.mono()
	if now.Sub(o.lastPresence) >= c.cfg.LeaseRenewInterval {
		if err := c.renewPresence(ctx, now); err != nil {
			c.log.Warn("renew replica presence", "node", c.cfg.Node, "err", err)
		}
	}
	live := c.leases.liveReplicas(now, c.cfg.LeaseTTL)
	if !slices.Contains(live, c.cfg.Node) {
		live = append(live, c.cfg.Node)
	}
	slices.Sort(live)
	var acquired, due, release []int
	for n := range c.cfg.Shards {
		want := live[n%len(live)] == c.cfg.Node
		if h, ok := o.held[n]; ok {
			if !want {
				release = append(release, n)
				continue
			}
			if now.Sub(h.renewed) >= c.cfg.LeaseRenewInterval {
				due = append(due, n)
			}
			continue
		}
		if c.tryAcquire(ctx, n, want, now) {
			acquired = append(acquired, n)
		}
	}
	if len(release) > 0 {
		c.releaseShards(ctx, release, "shares rebalanced over live replicas "+strings.Join(live, ","), c.cfg.LeaseRenewInterval)
	}
	if len(due) > 0 {
		c.renewShards(ctx, due, now)
	}
	if len(acquired) > 0 {
		c.shardsAcquired(ctx, acquired)
	}
	c.m.shardsOwned.Set(float64(len(o.held)))
	c.manageGroupLeases(ctx, now)
	c.placeWaiting(ctx, c.now())
}

// placeWaiting gives the PENDING executions waiting for an agent of their
// group to a live member. Registrations place them too, but a registration
// may be answered by another replica than the one that knows the waiting
// execution.
func (c *Controller) placeWaiting(ctx context.Context, now time.Time) {
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	if len(c.unplaced) == 0 {
		return
	}
	for _, a := range c.agents.snapshot() {
		if isOnline(a, now, c.cfg.AgentOfflineAfter) {
			c.placeUnplaced(ctx, a)
		}
	}
}

func (c *Controller) renewPresence(ctx context.Context, now time.Time) error {
	o := c.own
	data, err := json.Marshal(replicaLease{Node: c.cfg.Node, Instance: c.instance, Started: c.startedWall})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.leaseWriteTimeout())
	defer cancel()
	rev, err := c.kv.Leases.Put(ctx, replicaKey(c.cfg.Node), data)
	if err != nil {
		return err
	}
	o.lastPresence, o.presenceRev = now, rev
	return nil
}

// tryAcquire takes shard n when it is free (or lapsed, or this node's own
// from a previous process); without want only after it was left without
// a holder for a whole LeaseTTL (its designated owner is not taking it).
func (c *Controller) tryAcquire(ctx context.Context, n int, want bool, now time.Time) bool {
	o := c.own
	cur, ok := c.leases.shard(n)
	lapsed := ok && now.Sub(cur.seen) >= c.cfg.LeaseTTL
	if !ok || lapsed {
		if _, seen := o.absentSince[n]; !seen {
			o.absentSince[n] = now
		}
	} else {
		delete(o.absentSince, n)
	}
	if want && ok && !lapsed && cur.val.Node == c.cfg.Node && cur.val.Instance == c.instance {
		// This process's own lease, from an acquisition whose answer was
		// lost (a timeout): adopt it.
		o.held[n] = &heldShard{rev: cur.rev, since: cur.val.Since, renewed: cur.seen}
		delete(o.absentSince, n)
		c.log.Info("shard lease adopted (its acquisition's answer was lost)", "shard", n, "revision", cur.rev)
		return true
	}
	// This node's previous process (a restart): take its shards at once,
	// but only from an older process — of two processes running under one
	// node name (a misconfiguration, an overlapping restart), the newer
	// works the shards and the older leaves them, instead of both taking
	// them from each other forever.
	mine := ok && cur.val.Node == c.cfg.Node && cur.val.Instance != c.instance && c.olderThanMe(cur.val)
	if ok && !lapsed && cur.val.Node == c.cfg.Node && cur.val.Instance != c.instance && !mine && !o.newerSaid {
		o.newerSaid = true
		c.log.Error("another controller process runs under this node name and started later; it works the shards",
			"node", c.cfg.Node, "other_instance", cur.val.Instance, "instance", c.instance)
	}
	if !want {
		since, seen := o.absentSince[n]
		if !seen || now.Sub(since) < c.cfg.LeaseTTL {
			return false
		}
	} else if ok && !lapsed && !mine {
		return false // held by a live replica: it releases when it sees us
	}
	val := shardLease{Shard: n, Node: c.cfg.Node, Instance: c.instance, Since: c.now(), Started: c.startedWall}
	data, err := json.Marshal(val)
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, c.leaseWriteTimeout())
	defer cancel()
	var rev uint64
	if ok {
		rev, err = c.kv.Leases.Update(wctx, shardKey(n), data, cur.rev)
		if isCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL, which the watcher does not report: then it is free.
			if _, gerr := c.kv.Leases.Get(wctx, shardKey(n)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = c.kv.Leases.Create(wctx, shardKey(n), data)
			}
		}
	} else {
		rev, err = c.kv.Leases.Create(wctx, shardKey(n), data)
	}
	if err != nil {
		if !isCASMiss(err) {
			c.log.Warn("acquire shard lease", "shard", n, "err", err)
		}
		return false
	}
	c.leases.putShard(n, val, rev, now)
	delete(o.absentSince, n)
	o.held[n] = &heldShard{rev: rev, since: val.Since, renewed: now}
	if ok && cur.val.Node != c.cfg.Node {
		c.m.takeovers.WithLabelValues("shard").Inc()
		c.log.Warn("shard lease taken over", "shard", n, "old_holder", cur.val.Node, "old_instance", cur.val.Instance,
			"new_holder", c.cfg.Node, "new_instance", c.instance, "old_revision", cur.rev, "new_revision", rev,
			"since_last_renewal", now.Sub(cur.seen))
	} else {
		c.log.Debug("shard lease acquired", "shard", n, "node", c.cfg.Node, "instance", c.instance, "revision", rev)
	}
	return true
}

// shardsAcquired starts the workers of newly held shards and reloads their
// state: retry timers of RETRY_WAITING executions, PENDING runs, unplaced
// executions and one-shot jobs whose creation was cut short.
func (c *Controller) shardsAcquired(ctx context.Context, ns []int) {
	o := c.own
	set := map[int]bool{}
	for _, n := range ns {
		w, err := c.startShardWorker(ctx, n)
		if err != nil {
			c.log.Error("start shard worker; releasing the shard", "shard", n, "err", err)
			c.releaseShards(ctx, []int{n}, "its report worker did not start", 0)
			continue
		}
		o.held[n].w = w
		c.owned[n].Store(true)
		set[n] = true
	}
	if len(set) == 0 {
		return
	}
	c.log.Info("shards acquired", "shards", ns, "owned", len(o.held), "node", c.cfg.Node, "instance", c.instance)
	reload := func(ctx context.Context) {
		if err := c.reloadExecutions(ctx, set); err != nil && ctx.Err() == nil {
			c.log.Error("reload executions of acquired shards", "shards", ns, "err", err)
		}
	}
	if o.starting {
		reload(ctx) // Start returns with the retry timers armed
		return
	}
	// The reload scans every execution: not on this loop, which must keep
	// renewing leases meanwhile.
	c.goRun(reload)
}

// errShardLost: the shard lease names another holder, or is gone.
var errShardLost = errors.New("shard lease held by another replica or gone")

// olderThanMe reports whether the process holding l started before this one.
func (c *Controller) olderThanMe(l shardLease) bool {
	if !l.Started.Equal(c.startedWall) {
		return l.Started.Before(c.startedWall)
	}
	return l.Instance < c.instance
}

// renewShards renews the given held shards at once (one KV round trip in
// parallel, not one after the other) and applies the outcomes.
func (c *Controller) renewShards(ctx context.Context, ns []int, now time.Time) {
	o := c.own
	type result struct {
		rev uint64
		err error
	}
	res := make([]result, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		h := o.held[n]
		val := shardLease{Shard: n, Node: c.cfg.Node, Instance: c.instance, Since: h.since, Started: c.startedWall}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].rev, res[i].err = c.writeShardLease(ctx, n, val, h.rev)
		}()
	}
	wg.Wait()
	for i, n := range ns {
		h, r := o.held[n], res[i]
		switch {
		case r.err == nil:
			h.rev, h.renewed = r.rev, now
			c.leases.putShard(n, shardLease{Shard: n, Node: c.cfg.Node, Instance: c.instance, Since: h.since, Started: c.startedWall}, r.rev, now)
		case errors.Is(r.err, errShardLost):
			c.log.Warn("shard lease lost: another replica holds it, or it lapsed", "shard", n, "node", c.cfg.Node)
			c.dropShard(n, false)
		case c.mono().Sub(h.renewed) >= c.cfg.LeaseTTL-c.cfg.LeaseRenewInterval:
			// Not renewed for nearly a TTL (NATS unreachable): stop before
			// another replica may take it.
			c.log.Warn("shard lease not renewed in time; stopping the shard", "shard", n, "err", r.err)
			c.dropShard(n, false)
		default:
			c.log.Warn("renew shard lease", "shard", n, "err", r.err)
		}
	}
}

// writeShardLease renews shard n's lease (compare-and-set on rev). A write
// whose answer was lost (a timeout on a busy cluster) may still have
// landed: when the key then holds this replica's own lease, that counts.
func (c *Controller) writeShardLease(ctx context.Context, n int, val shardLease, rev uint64) (uint64, error) {
	data, err := json.Marshal(val)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.leaseWriteTimeout())
	defer cancel()
	newRev, err := c.kv.Leases.Update(wctx, shardKey(n), data, rev)
	if err == nil {
		return newRev, nil
	}
	rctx, rcancel := context.WithTimeout(ctx, c.leaseWriteTimeout())
	defer rcancel()
	e, gerr := c.kv.Leases.Get(rctx, shardKey(n))
	switch {
	case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
		return 0, errShardLost
	case gerr != nil:
		return 0, err
	}
	var cur shardLease
	if json.Unmarshal(e.Value(), &cur) == nil && cur.Node == c.cfg.Node && cur.Instance == c.instance {
		return e.Revision(), nil // ours: the renewal landed, or an earlier one did
	}
	return 0, errShardLost
}

// leaseWriteTimeout bounds one KV request of the lease bookkeeping: long
// enough for a busy cluster, short enough to act well within a TTL.
func (c *Controller) leaseWriteTimeout() time.Duration {
	return max(c.cfg.LeaseTTL/4, 100*time.Millisecond)
}

// isCASMiss reports a lost compare-and-set or create of a KV key.
func isCASMiss(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) ||
		errors.Is(err, jetstream.ErrKeyDeleted) || isWrongLastSeq(err)
}

// ShardOwners returns, for each shard, the node holding its lease ("" when
// none), as this replica sees ax_leases now.
func (c *Controller) ShardOwners() []string {
	out := make([]string, c.cfg.Shards)
	now := c.mono()
	for n := range out {
		if s, ok := c.leases.shard(n); ok && now.Sub(s.seen) < c.cfg.LeaseTTL {
			out[n] = s.val.Node
		}
	}
	return out
}
