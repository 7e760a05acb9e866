package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Group-job leases (docs/architecture.md: Leases and epochs). A periodic job with target {group, mode:
// any} fires on one agent of its group at a time: the holder of the lease
// job.<id> in ax_leases, with an epoch that grows with every grant.
//
//   - The replica that works the job's shard grants the lease (Create, or a
//     compare-and-set on the lapsed lease's revision) to a live member and
//     sends it the assignment with the epoch.
//   - The agent fires only while its lease is valid by its own monotonic
//     clock. Validity comes only from heartbeat replies: a heartbeat claims
//     the agent's group jobs, the replica answering it renews each lease
//     the agent still holds (compare-and-set) and grants LeaseTTL×0.9
//     counted from when the agent sent the heartbeat — before the renewal
//     was written, so the agent's lease always ends before the
//     controller's.
//   - A lease not renewed for LeaseTTL (counted from when this replica saw
//     the renewal) has lapsed on the agent too; the owner then grants it to
//     another live member with epoch+1 and takes the lost agent's running
//     executions of the job to RETRY_WAITING (reason agent_lost) or FAILED
//     when their attempts are spent (settleEpochs, leasesettle.go).
//   - Every grant is recorded in the job's epoch history (epochs.go)
//     first. A report under an epoch is accepted from the agent that held
//     it, also after the lease moved (a fire made while its lease was
//     valid is a legitimate execution); from any other agent it is refused
//     (ax_reports_rejected_total{reason="not_assigned"}). A report of an
//     older epoch than its execution's record changes nothing
//     (reason="old_epoch").
//   - A pinned job (target.agent) never has a lease and is never moved.

// groupState is the group-lease bookkeeping (Controller.groups), kept on
// the ownership loop alone.
type groupState struct {
	sent    map[string]sentAssign // job → assignment last sent to its holder
	leaving map[string]string     // job → holder told to stop (it left the group)
	waiting map[string]bool       // job → "no live member" already logged
}

type sentAssign struct {
	agent string
	epoch uint64
	gen   uint64
}

func newGroupState() groupState {
	return groupState{sent: map[string]sentAssign{}, leaving: map[string]string{}, waiting: map[string]bool{}}
}

// forgetShard drops the bookkeeping of the jobs in a shard given away.
func (g *groupState) forgetShard(in func(jobID string) bool) {
	for id := range g.sent {
		if in(id) {
			delete(g.sent, id)
		}
	}
	for id := range g.leaving {
		if in(id) {
			delete(g.leaving, id)
		}
	}
	for id := range g.waiting {
		if in(id) {
			delete(g.waiting, id)
		}
	}
}

// isGroupAny reports whether j is a periodic job leased to one agent of a group.
func isGroupAny(j protocol.Job) bool {
	return isPeriodic(j) && j.Target.Agent == "" && j.Target.Group != "" && j.Target.Mode != protocol.ModeAll
}

// isMember reports whether agent id is a registered, non-revoked member of
// j's group.
func (c *Controller) isMember(j protocol.Job, id string) bool {
	a, ok := c.agents.get(id)
	return ok && len(groupMembers(j, []protocol.AgentInfo{a})) == 1
}

// manageGroupLeases grants, re-sends and moves the leases of the group jobs
// in this replica's shards, and deletes those of jobs gone. now is c.mono().
func (c *Controller) manageGroupLeases(ctx context.Context, now time.Time) {
	if len(c.own.ownedShards()) == 0 {
		return
	}
	var agents []protocol.AgentInfo // read once, only when a lease is granted
	var lost []lostLease
	seen := map[string]bool{}
	for _, j := range c.jobs.groupAnyJobs() {
		if !c.own.ownsJob(j.ID) {
			continue
		}
		seen[j.ID] = true
		cur, ok := c.leases.job(j.ID)
		if ok && !cur.val.Released && now.Sub(cur.seen) < c.cfg.LeaseTTL {
			holder := cur.val.Agent
			if !c.isMember(j, holder) {
				// Left the group (revoked, labels changed): told to stop; the
				// lease is no longer renewed and moves once it has lapsed.
				if c.groups.leaving[j.ID] != holder {
					c.sendUnassign(ctx, j.ID, holder, c.groups.sent[j.ID].gen, "left the job's group")
					c.groups.leaving[j.ID] = holder
				}
				continue
			}
			s := c.groups.sent[j.ID]
			if s.agent != holder || s.epoch != cur.val.Epoch || s.gen != j.Generation {
				if c.sendAssign(ctx, j, holder, cur.val.Epoch, "group lease") {
					c.groups.sent[j.ID] = sentAssign{agent: holder, epoch: cur.val.Epoch, gen: j.Generation}
				}
			}
			continue
		}
		if agents == nil {
			agents = c.agents.snapshot()
		}
		if l := c.grantGroupLease(ctx, j, cur, ok, agents, now); l != nil {
			lost = append(lost, *l)
		}
	}
	for _, id := range c.leases.jobIDs() {
		if seen[id] || !c.own.ownsJob(id) {
			continue
		}
		// The job is gone or no longer a group job of mode any.
		cur, ok := c.leases.job(id)
		if !ok {
			continue
		}
		// Generation 0 removes a deleted job at any generation; a job that
		// changed target keeps its new generation on that agent.
		gen := uint64(0)
		if j, _, ok := c.jobs.get(id); ok && j.Generation > 0 {
			gen = j.Generation - 1
		}
		c.sendUnassign(ctx, id, cur.val.Agent, gen, "job no longer leased to a group member")
		if err := c.kv.Leases.Delete(ctx, jobLeaseKey(id), jetstream.LastRevision(cur.rev)); err != nil && !isCASMiss(err) {
			c.log.Warn("delete group lease", "job", id, "err", err)
			continue
		}
		c.leases.dropJob(id, cur.rev)
		delete(c.groups.sent, id)
		delete(c.groups.leaving, id)
	}
	for _, id := range c.epochs.jobIDs() {
		if seen[id] || !c.own.ownsJob(id) {
			continue
		}
		if _, ok := c.leases.job(id); ok {
			continue // its lease is deleted first (above)
		}
		// The job is gone or no longer leased (checked in KV: this
		// replica's cache may not have a job just created elsewhere).
		rctx, cancel := context.WithTimeout(ctx, leaseWriteTimeout(c.cfg.LeaseTTL))
		j, _, err := c.readJob(rctx, id)
		cancel()
		if errors.Is(err, ErrNotFound) || err == nil && !isGroupAny(j) {
			c.dropEpochs(ctx, id)
		}
	}
	if len(lost) > 0 {
		// It scans every execution: not on the ownership loop.
		c.goRun(func(ctx context.Context) { c.settleEpochs(ctx, lost) })
	}
}

// grantGroupLease leases j to a live member of its group: with epoch
// above any before, by Create (no lease) or compare-and-set on the lapsed
// lease's revision. The grant is first added to the job's epoch history
// (epochs.go). Every grant after an earlier one — the lease lapsed, was
// handed back, or expired from ax_leases while no controller ran — tells
// the previous holder to stop (unassign) and returns the lease to settle
// (settleEpochs); a job's first grant returns nil.
func (c *Controller) grantGroupLease(ctx context.Context, j protocol.Job, cur leaseSeen[groupLease], had bool, agents []protocol.AgentInfo, now time.Time) *lostLease {
	var live []protocol.AgentInfo
	for _, a := range groupMembers(j, agents) {
		if isOnline(a, c.now(), c.cfg.AgentOfflineAfter) {
			live = append(live, a)
		}
	}
	if had && len(live) > 1 {
		// Prefer another member over the one whose lease just lapsed.
		others := live[:0:0]
		for _, a := range live {
			if a.Agent != cur.val.Agent {
				others = append(others, a)
			}
		}
		live = others
	}
	if len(live) == 0 {
		if !c.groups.waiting[j.ID] {
			c.log.Warn("group job has no live agent to lease it to", "job", j.ID, "group", j.Target.Group)
			c.groups.waiting[j.ID] = true
		}
		return nil
	}
	delete(c.groups.waiting, j.ID)
	pick := rendezvous(j.ID, live)
	epoch, err := c.nextEpoch(ctx)
	if err != nil {
		c.log.Warn("group lease: read epoch", "job", j.ID, "err", err)
		return nil
	}
	if had {
		epoch = max(epoch, cur.val.Epoch+1)
	}
	prev, hadPrev, err := c.recordGrant(ctx, j.ID, pick, epoch)
	if err != nil {
		c.log.Warn("group lease: record grant", "job", j.ID, "agent", pick, "err", err)
		return nil
	}
	val := groupLease{Job: j.ID, Agent: pick, Epoch: epoch, GrantedAt: c.now()}
	data, err := json.Marshal(val)
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, leaseWriteTimeout(c.cfg.LeaseTTL))
	defer cancel()
	var rev uint64
	if had {
		rev, err = c.kv.Leases.Update(wctx, jobLeaseKey(j.ID), data, cur.rev)
		if isCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL: then it is free.
			if _, gerr := c.kv.Leases.Get(wctx, jobLeaseKey(j.ID)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = c.kv.Leases.Create(wctx, jobLeaseKey(j.ID), data)
			}
		}
	} else {
		rev, err = c.kv.Leases.Create(wctx, jobLeaseKey(j.ID), data)
	}
	if err != nil && !isCASMiss(err) {
		// The answer may be lost while the write landed (a timeout on a
		// busy cluster): the grant stands when the key holds it.
		rctx, rcancel := context.WithTimeout(ctx, leaseWriteTimeout(c.cfg.LeaseTTL))
		if e, gerr := c.kv.Leases.Get(rctx, jobLeaseKey(j.ID)); gerr == nil {
			var got groupLease
			if json.Unmarshal(e.Value(), &got) == nil && got.Agent == pick && got.Epoch == epoch {
				rev, err = e.Revision(), nil
			}
		}
		rcancel()
	}
	if err != nil {
		if !isCASMiss(err) {
			c.log.Warn("grant group lease", "job", j.ID, "agent", pick, "err", err)
		}
		return nil
	}
	c.leases.putJob(j.ID, val, rev, now)
	c.m.leaseGrants.Inc()
	var lost *lostLease
	switch {
	case had:
		since := now.Sub(cur.seen)
		if cur.val.Agent != pick {
			c.sendUnassign(ctx, j.ID, cur.val.Agent, c.groups.sent[j.ID].gen, "group lease moved to "+pick)
		}
		if cur.val.Released {
			c.log.Info("group lease handed over (its holder stopped)", "job", j.ID, "old_holder", cur.val.Agent,
				"old_epoch", cur.val.Epoch, "new_holder", pick, "new_epoch", epoch)
		} else {
			c.m.leaseExpiries.Inc()
			if cur.val.Agent != pick {
				c.m.takeovers.WithLabelValues("group").Inc()
				c.m.failover.Observe(since.Seconds())
			}
			c.log.Warn("group lease taken over", "job", j.ID, "old_holder", cur.val.Agent, "old_epoch", cur.val.Epoch,
				"new_holder", pick, "new_epoch", epoch, "since_last_renewal", since)
		}
		lost = &lostLease{job: j.ID, oldAgent: cur.val.Agent, newAgent: pick, epoch: epoch}
	case hadPrev:
		// The lease key expired (no controller renewed it for lease_ttl,
		// e.g. an outage): the job had a holder all the same.
		if prev.Agent != pick {
			// Generation 0: whatever generation it has there.
			c.sendUnassign(ctx, j.ID, prev.Agent, 0, "group lease granted to "+pick)
		}
		c.log.Warn("group lease granted again after it expired", "job", j.ID, "old_holder", prev.Agent,
			"old_epoch", prev.Epoch, "new_holder", pick, "new_epoch", epoch)
		lost = &lostLease{job: j.ID, oldAgent: prev.Agent, newAgent: pick, epoch: epoch}
	default:
		c.log.Info("group lease granted", "job", j.ID, "holder", pick, "epoch", epoch)
	}
	delete(c.groups.leaving, j.ID)
	if c.sendAssign(ctx, j, pick, epoch, "group lease granted") {
		c.groups.sent[j.ID] = sentAssign{agent: pick, epoch: epoch, gen: j.Generation}
	} else {
		delete(c.groups.sent, j.ID) // re-sent on the next pass
	}
	return lost
}

// nextEpoch returns an epoch above every epoch granted before: one past
// the last sequence of the ax_leases stream, which only grows (every
// earlier grant is a message of that stream).
func (c *Controller) nextEpoch(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, "KV_"+protocol.BucketLeases)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq + 1, nil
}

func (c *Controller) sendAssign(ctx context.Context, j protocol.Job, agent string, epoch uint64, reason string) bool {
	cmd := protocol.Command{Kind: protocol.CmdAssign, Agent: agent, Assign: &protocol.Assign{Job: j, Epoch: epoch}}
	if err := c.publishCommand(ctx, cmd, ""); err != nil {
		c.log.Error("send assign", "job", j.ID, "agent", agent, "epoch", epoch, "err", err)
		return false
	}
	c.log.Info("job assigned", "job", j.ID, "agent", agent, "generation", j.Generation, "epoch", epoch, "reason", reason)
	return true
}

func (c *Controller) sendUnassign(ctx context.Context, jobID, agent string, gen uint64, reason string) {
	cmd := protocol.Command{Kind: protocol.CmdUnassign, Agent: agent, Unassign: &protocol.Unassign{JobID: jobID, Generation: gen, Reason: reason}}
	if err := c.publishCommand(ctx, cmd, ""); err != nil {
		c.log.Error("send unassign", "job", jobID, "agent", agent, "err", err)
		return
	}
	c.log.Info("job unassigned", "job", jobID, "agent", agent, "reason", reason)
}

// leaseRenewBatch is how many lease renewals of one heartbeat are in
// flight at once.
const leaseRenewBatch = 32

// renewLeases answers the lease claims of a heartbeat from agent a: each
// lease the agent still holds in ax_leases, for a job whose group it is
// still in, is renewed (compare-and-set) and granted for LeaseTTL×0.9 from
// the heartbeat's send; the others are lost. A claim that cannot be
// checked now (NATS error) is neither.
func (c *Controller) renewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease) {
	ttl := c.cfg.LeaseTTL - c.cfg.LeaseTTL/10
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LeaseTTL/2)
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
		j, _, ok := c.jobs.get(cl.JobID)
		if out[i].member = ok && isGroupAny(j) && len(groupMembers(j, []protocol.AgentInfo{a})) == 1; !out[i].member {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].held, out[i].err = c.renewLease(ctx, a.Agent, cl)
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
			c.log.Warn("renew group lease", "job", cl.JobID, "agent", a.Agent, "err", err)
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
func (c *Controller) renewLease(ctx context.Context, agent string, cl protocol.HeldLease) (held bool, err error) {
	key := jobLeaseKey(cl.JobID)
	write := func(val groupLease, rev uint64) (bool, error) {
		val.RenewedAt = c.now()
		data, err := json.Marshal(val)
		if err != nil {
			return false, err
		}
		newRev, err := c.leaseKV.Update(ctx, key, data, rev)
		if err != nil {
			return false, err
		}
		c.leases.putJob(cl.JobID, val, newRev, c.mono())
		return true, nil
	}
	if v, ok := c.leases.job(cl.JobID); ok && v.val.Agent == agent && v.val.Epoch == cl.Epoch && !v.val.Released {
		if ok, err := write(v.val, v.rev); ok || !isCASMiss(err) {
			return ok, err
		}
	}
	e, err := c.kv.Leases.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var val groupLease
	if err := json.Unmarshal(e.Value(), &val); err != nil || val.Agent != agent || val.Epoch != cl.Epoch || val.Released {
		return false, nil
	}
	ok, err := write(val, e.Revision())
	if isCASMiss(err) {
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
func (c *Controller) releaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LeaseTTL/2)
	defer cancel()
	for _, cl := range claims {
		key := jobLeaseKey(cl.JobID)
		e, err := c.kv.Leases.Get(ctx, key)
		if err != nil {
			continue
		}
		var val groupLease
		if json.Unmarshal(e.Value(), &val) != nil || val.Agent != agent || val.Epoch != cl.Epoch || val.Released {
			continue
		}
		val.Released = true
		data, err := json.Marshal(val)
		if err != nil {
			continue
		}
		rev, err := c.kv.Leases.Update(ctx, key, data, e.Revision())
		if err != nil {
			c.log.Warn("release group lease", "job", cl.JobID, "agent", agent, "err", err)
			continue
		}
		c.leases.putJob(cl.JobID, val, rev, c.mono())
		c.leases.signal()
	}
}
