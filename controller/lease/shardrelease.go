package lease

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
)

// Keeping shards and giving them up: renewed every LeaseRenewInterval;
// handed over on a rebalance or a clean stop (drained, keys deleted),
// dropped when their lease was lost, abandoned in a crash.

// renewShards renews the given held shards at once (one KV round trip in
// parallel, not one after the other) and applies the outcomes.
func (o *Ownership) renewShards(ctx context.Context, ns []int, now time.Time) {
	type result struct {
		rev uint64
		err error
	}
	res := make([]result, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		h := o.held[n]
		val := Shard{Shard: n, Node: o.cfg.Node, Instance: o.instance, Since: h.since, Started: o.started}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].rev, res[i].err = o.writeShardLease(ctx, n, val, h.rev)
		}()
	}
	wg.Wait()
	for i, n := range ns {
		h, r := o.held[n], res[i]
		switch {
		case r.err == nil:
			h.rev = r.rev
			o.noteRenewed(n, now)
			o.leases.PutShard(n, Shard{Shard: n, Node: o.cfg.Node, Instance: o.instance, Since: h.since, Started: o.started}, r.rev, now)
		case errors.Is(r.err, errShardLost):
			o.log.Warn("shard lease lost: another replica holds it, or it lapsed", "shard", n, "node", o.cfg.Node)
			o.dropShard(n, false)
		case o.sinceRenewed(n, o.mono()) >= o.cfg.LeaseTTL-o.cfg.LeaseRenewInterval:
			// Not renewed for nearly a TTL (NATS unreachable): stop before
			// another replica may take it.
			o.log.Warn("shard lease not renewed in time; stopping the shard", "shard", n, "err", r.err)
			o.dropShard(n, false)
		default:
			o.log.Warn("renew shard lease", "shard", n, "err", r.err)
		}
	}
}

// writeShardLease renews shard n's lease (compare-and-set on rev). A write
// whose answer was lost (a timeout on a busy cluster) may still have
// landed: when the key then holds this replica's own lease, that counts.
func (o *Ownership) writeShardLease(ctx context.Context, n int, val Shard, rev uint64) (uint64, error) {
	data, err := json.Marshal(val)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout(o.cfg.LeaseTTL))
	defer cancel()
	newRev, err := o.kv.Update(wctx, ShardKey(n), data, rev)
	if err == nil {
		return newRev, nil
	}
	rctx, rcancel := context.WithTimeout(ctx, WriteTimeout(o.cfg.LeaseTTL))
	defer rcancel()
	e, gerr := o.kv.Get(rctx, ShardKey(n))
	switch {
	case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
		return 0, errShardLost
	case gerr != nil:
		return 0, err
	}
	var cur Shard
	if json.Unmarshal(e.Value(), &cur) == nil && cur.Node == o.cfg.Node && cur.Instance == o.instance {
		return e.Revision(), nil // ours: the renewal landed, or an earlier one did
	}
	return 0, errShardLost
}

// WriteTimeout bounds one KV request of the lease bookkeeping (the shard
// leases here, the group leases and their epochs in the controller) under
// lease TTL ttl: long enough for a busy cluster, short enough to act well
// within a TTL.
func WriteTimeout(ttl time.Duration) time.Duration {
	return max(ttl/4, 100*time.Millisecond)
}

// IsCASMiss reports a lost compare-and-set or create of a KV key: the key
// exists (a create), is gone, or has another revision (an update or a
// delete on a revision).
func IsCASMiss(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) ||
		errors.Is(err, jetstream.ErrKeyDeleted) || streams.IsWrongLastSeq(err)
}

// ShardOwners returns, for each shard, the node holding its lease ("" when
// none), as this replica sees ax_leases now. Safe for concurrent use.
func (o *Ownership) ShardOwners() []string {
	out := make([]string, o.cfg.Shards)
	now := o.mono()
	for n := range out {
		if s, ok := o.leases.Shard(n); ok && now.Sub(s.Seen) < o.cfg.LeaseTTL {
			out[n] = s.Val.Node
		}
	}
	return out
}

// releaseShards hands shards ns over: their workers drain what they
// pulled, in parallel and each for at most drainMax, then their keys are
// deleted (compare-and-set) so that the new owner creates them.
func (o *Ownership) releaseShards(ctx context.Context, ns []int, why string, drainMax time.Duration) {
	var held []*heldShard
	var nums []int
	for _, n := range ns {
		if h, ok := o.held[n]; ok {
			o.owned[n].Store(false)
			delete(o.held, n)
			held, nums = append(held, h), append(nums, n)
		}
	}
	var wg sync.WaitGroup
	for _, h := range held {
		if h.w != nil {
			wg.Add(1)
			go func() { defer wg.Done(); h.w.Stop(true, drainMax) }()
		}
	}
	wg.Wait()
	for i, n := range nums {
		o.host.ForgetShard(n)
		wctx, cancel := context.WithTimeout(ctx, WriteTimeout(o.cfg.LeaseTTL))
		if err := o.kv.Delete(wctx, ShardKey(n), jetstream.LastRevision(held[i].rev)); err != nil && !IsCASMiss(err) {
			o.log.Warn("release shard lease", "shard", n, "err", err)
		}
		cancel()
		o.leases.DropShard(n, held[i].rev)
	}
	if len(nums) > 0 {
		o.log.Info("shards released", "shards", nums, "node", o.cfg.Node, "why", why)
	}
}

// dropShard stops working shard n at once (its lease was lost): the worker
// stops without draining, its retry timers and group-lease bookkeeping go.
func (o *Ownership) dropShard(n int, drain bool) {
	h, ok := o.held[n]
	if !ok {
		return
	}
	o.owned[n].Store(false)
	delete(o.held, n)
	if h.w != nil {
		h.w.Stop(drain, o.cfg.LeaseTTL/2)
	}
	o.host.ForgetShard(n)
}

// releaseAll releases every held shard and the presence key (clean stop).
func (o *Ownership) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ns := make([]int, 0, len(o.held))
	for n := range o.held {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	o.releaseShards(ctx, ns, whyStopping, o.cfg.LeaseTTL/2)
	if o.presenceRev != 0 {
		_ = o.kv.Delete(ctx, ReplicaKey(o.cfg.Node), jetstream.LastRevision(o.presenceRev))
	}
}

// abandonShards stops the workers without releasing anything (a crash).
func (o *Ownership) abandonShards() {
	for n, h := range o.held {
		o.owned[n].Store(false)
		if h.w != nil {
			h.w.Stop(false, 0)
		}
	}
}

// OwnerInstance returns the process instance holding the lease of job
// id's shard, as this replica's view has it, or "" when no lease of it
// was seen within LeaseTTL (the job-change driver asks it:
// controller/driver).
func (o *Ownership) OwnerInstance(id string) string {
	if s, ok := o.leases.Shard(o.ShardOf(id)); ok && o.mono().Sub(s.Seen) < o.cfg.LeaseTTL {
		return s.Val.Instance
	}
	return ""
}
