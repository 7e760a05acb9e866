package lease

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
)

// The group leases in heartbeats: an agent's heartbeat claims the leases
// it holds, the replica answering it renews them (RenewLeases); a stopping
// agent hands them back (ReleaseLeases). Both run on the heartbeat
// workers (the fleet asks the controller for them through fleet.Host).

// leaseRenewBatch is how many lease renewals of one heartbeat are in
// flight at once.
const leaseRenewBatch = 32

// RenewLeases answers the lease claims of a heartbeat from agent a: each
// lease the agent still holds in ax_leases, for a job whose group it is
// still in, is renewed (compare-and-set) and granted for LeaseTTL×0.9 from
// the heartbeat's send; the others are lost. A claim that cannot be
// checked now (NATS error, a job this replica has not seen yet) is
// neither. Safe for concurrent use.
func (g *GroupLeases) RenewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease) {
	ttl := g.cfg.LeaseTTL - g.cfg.LeaseTTL/10
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LeaseTTL/2)
	defer cancel()
	// The claims are renewed together (up to leaseRenewBatch writes in
	// flight): a heartbeat claiming n leases waits for about one round
	// trip to ax_leases, not n.
	type outcome struct {
		unseen, member, held bool
		err                  error
	}
	out := make([]outcome, len(claims))
	sem := make(chan struct{}, leaseRenewBatch)
	var wg sync.WaitGroup
	for i, cl := range claims {
		j, _, ok := g.jobs.Get(cl.JobID)
		if !ok && !g.jobs.Known(cl.JobID, 0) {
			// A job this replica's cache has not seen, live or deleted
			// (its watcher behind another replica's create): the claim
			// cannot be checked now; it lapses at its TTL unless a replica
			// that knows the job renews it.
			out[i].unseen = true
			continue
		}
		if out[i].member = ok && j.GroupAny() && len(fleet.GroupMembers(j, []protocol.AgentInfo{a})) == 1; !out[i].member {
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
		if out[i].unseen {
			continue
		}
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
func (g *GroupLeases) renewLease(ctx context.Context, agent string, cl protocol.HeldLease) (held bool, err error) {
	key := JobKey(cl.JobID)
	write := func(val Group, rev uint64) (bool, error) {
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
		if ok, err := write(v.Val, v.Rev); ok || !IsCASMiss(err) {
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
	var val Group
	if err := json.Unmarshal(e.Value(), &val); err != nil || val.Agent != agent || val.Epoch != cl.Epoch || val.Released {
		return false, nil
	}
	ok, err := write(val, e.Revision())
	if IsCASMiss(err) {
		return false, errLeaseRaced // changed between the read and the write: the next heartbeat tells
	}
	return ok, err
}

// ReleaseLeases marks the leases agent claims as released (it stopped
// firing and is shutting down), so that the owner of each job's shard
// grants it to another member at its next pass, without waiting for the
// TTL. A lease that names another holder or epoch is left alone. Safe for
// concurrent use.
func (g *GroupLeases) ReleaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LeaseTTL/2)
	defer cancel()
	for _, cl := range claims {
		key := JobKey(cl.JobID)
		e, err := g.kv.Leases.Get(ctx, key)
		if err != nil {
			continue
		}
		var val Group
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
