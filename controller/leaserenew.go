package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/pkg/protocol"
)

// The group leases in heartbeats: an agent's heartbeat claims the leases
// it holds, the replica answering it renews them (renewLeases); a stopping
// agent hands them back (releaseLeases). Both run on the heartbeat
// workers (the fleet asks for them through fleet.Host).

// renewLeases answers the lease claims of a heartbeat (fleet.Host,
// groupLeases.renewLeases).
func (c *agentService) renewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease) {
	return c.groups.renewLeases(ctx, a, claims)
}

// releaseLeases hands back the leases of a stopping agent (fleet.Host,
// groupLeases.releaseLeases).
func (c *agentService) releaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease) {
	c.groups.releaseLeases(ctx, agent, claims)
}

// leaseRenewBatch is how many lease renewals of one heartbeat are in
// flight at once.
const leaseRenewBatch = 32

// renewLeases answers the lease claims of a heartbeat from agent a: each
// lease the agent still holds in ax_leases, for a job whose group it is
// still in, is renewed (compare-and-set) and granted for LeaseTTL×0.9 from
// the heartbeat's send; the others are lost. A claim that cannot be
// checked now (NATS error) is neither.
func (g *groupLeases) renewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease) {
	ttl := g.cfg.LeaseTTL - g.cfg.LeaseTTL/10
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LeaseTTL/2)
	defer cancel()
	// The claims are renewed together (up to leaseRenewBatch writes in
	// flight): a heartbeat claiming n leases waits for about one round
	// trip to ax_leases, not n.
	type outcome struct {
		member, held bool
		err          error
	}
	out := make([]outcome, len(claims))
	sem := make(chan struct{}, leaseRenewBatch)
	var wg sync.WaitGroup
	for i, cl := range claims {
		j, _, ok := g.jobs.Get(cl.JobID)
		if out[i].member = ok && j.GroupAny() && len(groupMembers(j, []protocol.AgentInfo{a})) == 1; !out[i].member {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].held, out[i].err = g.renewLease(ctx, a.Agent, cl)
		}()
	}
	wg.Wait()
	for i, cl := range claims {
		if !out[i].member {
			lost = append(lost, cl)
			continue
		}
		switch held, err := out[i].held, out[i].err; {
		case errors.Is(err, errLeaseRaced):
		case err != nil:
			g.log.Warn("renew group lease", "job", cl.JobID, "agent", a.Agent, "err", err)
		case held:
			renewed = append(renewed, protocol.Lease{JobID: cl.JobID, Epoch: cl.Epoch, TTL: protocol.Duration(ttl)})
		default:
			lost = append(lost, cl)
		}
	}
	return renewed, lost
}

// renewLease renews one claimed lease: first a compare-and-set on the
// revision this replica's view has (one round trip, the usual case), else
// on the revision read now. held is false when the lease names another
// agent or epoch, or is gone.
func (g *groupLeases) renewLease(ctx context.Context, agent string, cl protocol.HeldLease) (held bool, err error) {
	key := lease.JobKey(cl.JobID)
	write := func(val lease.Group, rev uint64) (bool, error) {
		val.RenewedAt = g.now()
		data, err := json.Marshal(val)
		if err != nil {
			return false, err
		}
		newRev, err := g.leaseKV.Update(ctx, key, data, rev)
		if err != nil {
			return false, err
		}
		g.leases.PutJob(cl.JobID, val, newRev, g.mono())
		return true, nil
	}
	if v, ok := g.leases.Job(cl.JobID); ok && v.Val.Agent == agent && v.Val.Epoch == cl.Epoch && !v.Val.Released {
		if ok, err := write(v.Val, v.Rev); ok || !lease.IsCASMiss(err) {
			return ok, err
		}
	}
	e, err := g.kv.Leases.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var val lease.Group
	if err := json.Unmarshal(e.Value(), &val); err != nil || val.Agent != agent || val.Epoch != cl.Epoch || val.Released {
		return false, nil
	}
	ok, err := write(val, e.Revision())
	if lease.IsCASMiss(err) {
		return false, errLeaseRaced // changed between the read and the write: the next heartbeat tells
	}
	return ok, err
}

// errLeaseRaced: a lease changed while it was being renewed; the claim is
// answered neither renewed nor lost.
var errLeaseRaced = errors.New("lease changed during its renewal")

// releaseLeases marks the leases agent claims as released (it stopped
// firing and is shutting down), so that the owner of each job's shard
// grants it to another member at its next pass, without waiting for the
// TTL. A lease that names another holder or epoch is left alone.
func (g *groupLeases) releaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LeaseTTL/2)
	defer cancel()
	for _, cl := range claims {
		key := lease.JobKey(cl.JobID)
		e, err := g.kv.Leases.Get(ctx, key)
		if err != nil {
			continue
		}
		var val lease.Group
		if json.Unmarshal(e.Value(), &val) != nil || val.Agent != agent || val.Epoch != cl.Epoch || val.Released {
			continue
		}
		val.Released = true
		data, err := json.Marshal(val)
		if err != nil {
			continue
		}
		rev, err := g.kv.Leases.Update(ctx, key, data, e.Revision())
		if err != nil {
			g.log.Warn("release group lease", "job", cl.JobID, "agent", agent, "err", err)
			continue
		}
		g.leases.PutJob(cl.JobID, val, rev, g.mono())
		g.leases.Signal()
	}
}
