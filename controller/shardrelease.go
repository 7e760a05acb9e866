package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Giving shards up: handed over on a rebalance or a clean stop (drained,
// keys deleted), dropped when their lease was lost, abandoned in a crash.

// releaseShards hands shards ns over: their workers drain what they
// pulled, in parallel and each for at most drainMax, then their keys are
// deleted (compare-and-set) so that the new owner creates them.
func (c *Controller) releaseShards(ctx context.Context, ns []int, why string, drainMax time.Duration) {
	o := c.own
	var held []*heldShard
	var nums []int
	for _, n := range ns {
		if h, ok := o.held[n]; ok {
			c.owned[n].Store(false)
			delete(o.held, n)
			held, nums = append(held, h), append(nums, n)
		}
	}
	var wg sync.WaitGroup
	for _, h := range held {
		if h.w != nil {
			wg.Add(1)
			go func() { defer wg.Done(); h.w.stop(true, drainMax) }()
		}
	}
	wg.Wait()
	for i, n := range nums {
		c.forgetShard(n)
		wctx, cancel := context.WithTimeout(ctx, c.leaseWriteTimeout())
		if err := c.kv.Leases.Delete(wctx, shardKey(n), jetstream.LastRevision(held[i].rev)); err != nil && !isCASMiss(err) {
			c.log.Warn("release shard lease", "shard", n, "err", err)
		}
		cancel()
		c.leases.dropShard(n, held[i].rev)
	}
	if len(nums) > 0 {
		c.log.Info("shards released", "shards", nums, "node", c.cfg.Node, "why", why)
	}
}

// dropShard stops working shard n at once (its lease was lost): the worker
// stops without draining, its retry timers and group-lease bookkeeping go.
func (c *Controller) dropShard(n int, drain bool) {
	o := c.own
	h, ok := o.held[n]
	if !ok {
		return
	}
	c.owned[n].Store(false)
	delete(o.held, n)
	if h.w != nil {
		h.w.stop(drain, c.cfg.LeaseTTL/2)
	}
	c.forgetShard(n)
}

// forgetShard drops the retry timers and group-lease bookkeeping of the
// jobs of shard n (its new owner reloads them).
func (c *Controller) forgetShard(n int) {
	if c.retries != nil {
		c.retries.dropWhere(func(jobID string) bool { return c.shardOfJob(jobID) == n })
	}
	c.own.groups.forgetShard(func(jobID string) bool { return c.shardOfJob(jobID) == n })
}

// releaseAll releases every held shard and the presence key (clean stop).
func (c *Controller) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	o := c.own
	ns := make([]int, 0, len(o.held))
	for n := range o.held {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	c.releaseShards(ctx, ns, whyStopping, c.cfg.LeaseTTL/2)
	if o.presenceRev != 0 {
		_ = c.kv.Leases.Delete(ctx, replicaKey(c.cfg.Node), jetstream.LastRevision(o.presenceRev))
	}
}

// abandonShards stops the workers without releasing anything (a crash).
func (c *Controller) abandonShards() {
	for n, h := range c.own.held {
		c.owned[n].Store(false)
		if h.w != nil {
			h.w.stop(false, 0)
		}
	}
}
