package controller

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/streams"
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

// groupState is the bookkeeping of the group leases (groupLeases.state),
// kept on the ownership loop alone.
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

// groupLeaseHost is what the group leases ask of the rest of the
// controller.
type groupLeaseHost interface {
	// publishCommand publishes cmd to its agent on AX_CMD (msgID "": none).
	publishCommand(ctx context.Context, cmd protocol.Command, msgID string) error
	// readJob reads job id from ax_jobs (ErrNotFound: there is none).
	readJob(ctx context.Context, id string) (protocol.Job, uint64, error)
	// settleEpochs moves on the executions still open under an earlier
	// epoch of the given leases, granted again (leasesettle.go).
	settleEpochs(ctx context.Context, lost []lostLease)
}

// groupLeaseConfig is the group leases' part of the controller's Config.
type groupLeaseConfig struct {
	LeaseTTL          time.Duration
	AgentOfflineAfter time.Duration // a member offline this long gets no lease
}

// groupLeaseMetrics are the controller's metrics the group leases set.
type groupLeaseMetrics struct {
	leaseGrants, leaseExpiries prometheus.Counter
	takeovers                  *prometheus.CounterVec // by kind; the group leases count "group"
	failover                   prometheus.Histogram
}

// groupLeaseEnv is what the group leases are given at construction
// (newGroupLeases) and at start (attach).
type groupLeaseEnv struct {
	cfg   groupLeaseConfig
	log   *slog.Logger
	m     groupLeaseMetrics
	now   func() time.Time // the clock in UTC, as written to KV
	mono  func() time.Time // the clock lease durations are measured with
	goRun func(func(context.Context))
	// The controller's views: ax_leases, ax_jobs, the agents' registry; and
	// which shards this replica works (own).
	leases *lease.View
	jobs   *jobcache.Cache
	agents *fleet.Registry
	own    *lease.Ownership

	// Set by attach, read-only afterwards.
	ctx context.Context // the controller's: cancelled by Close
	js  jetstream.JetStream
	kv  streams.Buckets
	// leaseKV is ax_leases as the heartbeat path writes it (renewLease):
	// wrapKV of the bucket when a test set Controller.wrapKV (to delay the
	// writes), else the bucket.
	leaseKV jetstream.KeyValue
}

// groupLeases grants the leases of the group jobs (mode any) of the shards
// this replica works, moves them when they lapse, renews and releases
// them for the agents' heartbeats, and keeps the epoch history (epochs
// holds its view of ax_epochs). It owns the writes of job.<id> in
// ax_leases and of ax_epochs, and the bookkeeping of what it sent (state).
//
// Concurrency: manageGroupLeases and grantGroupLease run on the ownership
// loop (once a pass, through lease.OwnershipHost), which alone reads and
// writes state (forgetShard, from the same loop, drops a shard's part); the
// settling of lost leases runs on a goroutine of its own. renewLeases and
// releaseLeases run on the heartbeat workers, epochHolder and isMember on
// the report lanes, currentHolder on the retry loop: they never touch
// state, only KV and the views (leases, epochs, jobs, agents: each has its
// own lock).
type groupLeases struct {
	*groupLeaseEnv
	host   groupLeaseHost
	epochs *epochView // group-job lease grants (epochs.go)
	state  groupState
}

// newGroupLeases returns the group leases of env, asking host for the rest.
func newGroupLeases(env groupLeaseEnv, host groupLeaseHost) *groupLeases {
	return &groupLeases{groupLeaseEnv: &env, host: host, epochs: newEpochView(), state: newGroupState()}
}

// attach gives the group leases the controller's context, connection and
// buckets, before they load ax_epochs.
func (g *groupLeases) attach(ctx context.Context, js jetstream.JetStream, kv streams.Buckets, leaseKV jetstream.KeyValue) {
	g.ctx, g.js, g.kv, g.leaseKV = ctx, js, kv, leaseKV
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

// manageGroupLeases runs the group leases' pass of the ownership loop
// (groupLeases.manageGroupLeases).
func (c *placer) manageGroupLeases(ctx context.Context, now time.Time) {
	c.groups.manageGroupLeases(ctx, now)
}

// isMember reports whether agent id is a registered, non-revoked member of
// j's group.
func (g *groupLeases) isMember(j protocol.Job, id string) bool {
	a, ok := g.agents.Get(id)
	return ok && len(groupMembers(j, []protocol.AgentInfo{a})) == 1
}

// manageGroupLeases grants, re-sends and moves the leases of the group jobs
// in this replica's shards, and deletes those of jobs gone. now is g.mono().
func (g *groupLeases) manageGroupLeases(ctx context.Context, now time.Time) {
	if len(g.own.OwnedShards()) == 0 {
		return
	}
	var agents []protocol.AgentInfo // read once, only when a lease is granted
	var lost []lostLease
	seen := map[string]bool{}
	for _, j := range g.jobs.GroupAnyJobs() {
		if !g.own.OwnsJob(j.ID) {
			continue
		}
		seen[j.ID] = true
		cur, ok := g.leases.Job(j.ID)
		if ok && !cur.Val.Released && now.Sub(cur.Seen) < g.cfg.LeaseTTL {
			holder := cur.Val.Agent
			if !g.isMember(j, holder) {
				// Left the group (revoked, labels changed): told to stop; the
				// lease is no longer renewed and moves once it has lapsed.
				if g.state.leaving[j.ID] != holder {
					g.sendUnassign(ctx, j.ID, holder, g.state.sent[j.ID].gen, "left the job's group")
					g.state.leaving[j.ID] = holder
				}
				continue
			}
			s := g.state.sent[j.ID]
			if s.agent != holder || s.epoch != cur.Val.Epoch || s.gen != j.Generation {
				if g.sendAssign(ctx, j, holder, cur.Val.Epoch, "group lease") {
					g.state.sent[j.ID] = sentAssign{agent: holder, epoch: cur.Val.Epoch, gen: j.Generation}
				}
			}
			continue
		}
		if agents == nil {
			agents = g.agents.Snapshot()
		}
		if l := g.grantGroupLease(ctx, j, cur, ok, agents, now); l != nil {
			lost = append(lost, *l)
		}
	}
	for _, id := range g.leases.JobIDs() {
		if seen[id] || !g.own.OwnsJob(id) {
			continue
		}
		// The job is gone or no longer a group job of mode any.
		cur, ok := g.leases.Job(id)
		if !ok {
			continue
		}
		// Generation 0 removes a deleted job at any generation; a job that
		// changed target keeps its new generation on that agent.
		gen := uint64(0)
		if j, _, ok := g.jobs.Get(id); ok && j.Generation > 0 {
			gen = j.Generation - 1
		}
		g.sendUnassign(ctx, id, cur.Val.Agent, gen, "job no longer leased to a group member")
		if err := g.kv.Leases.Delete(ctx, lease.JobKey(id), jetstream.LastRevision(cur.Rev)); err != nil && !lease.IsCASMiss(err) {
			g.log.Warn("delete group lease", "job", id, "err", err)
			continue
		}
		g.leases.DropJob(id, cur.Rev)
		delete(g.state.sent, id)
		delete(g.state.leaving, id)
	}
	for _, id := range g.epochs.jobIDs() {
		if seen[id] || !g.own.OwnsJob(id) {
			continue
		}
		if _, ok := g.leases.Job(id); ok {
			continue // its lease is deleted first (above)
		}
		// The job is gone or no longer leased (checked in KV: this
		// replica's cache may not have a job just created elsewhere).
		rctx, cancel := context.WithTimeout(ctx, lease.WriteTimeout(g.cfg.LeaseTTL))
		j, _, err := g.host.readJob(rctx, id)
		cancel()
		if errors.Is(err, ErrNotFound) || err == nil && !j.GroupAny() {
			g.dropEpochs(ctx, id)
		}
	}
	if len(lost) > 0 {
		// It scans every execution: not on the ownership loop.
		g.goRun(func(ctx context.Context) { g.host.settleEpochs(ctx, lost) })
	}
}

// grantGroupLease leases j to a live member of its group: with epoch
// above any before, by Create (no lease) or compare-and-set on the lapsed
// lease's revision. The grant is first added to the job's epoch history
// (epochs.go). Every grant after an earlier one — the lease lapsed, was
// handed back, or expired from ax_leases while no controller ran — tells
// the previous holder to stop (unassign) and returns the lease to settle
// (settleEpochs); a job's first grant returns nil.
func (g *groupLeases) grantGroupLease(ctx context.Context, j protocol.Job, cur lease.Seen[lease.Group], had bool, agents []protocol.AgentInfo, now time.Time) *lostLease {
	var live []protocol.AgentInfo
	for _, a := range groupMembers(j, agents) {
		if fleet.IsOnline(a, g.now(), g.cfg.AgentOfflineAfter) {
			live = append(live, a)
		}
	}
	if had && len(live) > 1 {
		// Prefer another member over the one whose lease just lapsed.
		others := live[:0:0]
		for _, a := range live {
			if a.Agent != cur.Val.Agent {
				others = append(others, a)
			}
		}
		live = others
	}
	if len(live) == 0 {
		if !g.state.waiting[j.ID] {
			g.log.Warn("group job has no live agent to lease it to", "job", j.ID, "group", j.Target.Group)
			g.state.waiting[j.ID] = true
		}
		return nil
	}
	delete(g.state.waiting, j.ID)
	pick := rendezvous(j.ID, live)
	epoch, err := g.nextEpoch(ctx)
	if err != nil {
		g.log.Warn("group lease: read epoch", "job", j.ID, "err", err)
		return nil
	}
	if had {
		epoch = max(epoch, cur.Val.Epoch+1)
	}
	prev, hadPrev, err := g.recordGrant(ctx, j.ID, pick, epoch)
	if err != nil {
		g.log.Warn("group lease: record grant", "job", j.ID, "agent", pick, "err", err)
		return nil
	}
	val := lease.Group{Job: j.ID, Agent: pick, Epoch: epoch, GrantedAt: g.now()}
	data, err := json.Marshal(val)
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, lease.WriteTimeout(g.cfg.LeaseTTL))
	defer cancel()
	var rev uint64
	if had {
		rev, err = g.kv.Leases.Update(wctx, lease.JobKey(j.ID), data, cur.Rev)
		if lease.IsCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL: then it is free.
			if _, gerr := g.kv.Leases.Get(wctx, lease.JobKey(j.ID)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = g.kv.Leases.Create(wctx, lease.JobKey(j.ID), data)
			}
		}
	} else {
		rev, err = g.kv.Leases.Create(wctx, lease.JobKey(j.ID), data)
	}
	if err != nil && !lease.IsCASMiss(err) {
		// The answer may be lost while the write landed (a timeout on a
		// busy cluster): the grant stands when the key holds it.
		rctx, rcancel := context.WithTimeout(ctx, lease.WriteTimeout(g.cfg.LeaseTTL))
		if e, gerr := g.kv.Leases.Get(rctx, lease.JobKey(j.ID)); gerr == nil {
			var got lease.Group
			if json.Unmarshal(e.Value(), &got) == nil && got.Agent == pick && got.Epoch == epoch {
				rev, err = e.Revision(), nil
			}
		}
		rcancel()
	}
	if err != nil {
		if !lease.IsCASMiss(err) {
			g.log.Warn("grant group lease", "job", j.ID, "agent", pick, "err", err)
		}
		return nil
	}
	g.leases.PutJob(j.ID, val, rev, now)
	g.m.leaseGrants.Inc()
	var lost *lostLease
	switch {
	case had:
		since := now.Sub(cur.Seen)
		if cur.Val.Agent != pick {
			g.sendUnassign(ctx, j.ID, cur.Val.Agent, g.state.sent[j.ID].gen, "group lease moved to "+pick)
		}
		if cur.Val.Released {
			g.log.Info("group lease handed over (its holder stopped)", "job", j.ID, "old_holder", cur.Val.Agent,
				"old_epoch", cur.Val.Epoch, "new_holder", pick, "new_epoch", epoch)
		} else {
			g.m.leaseExpiries.Inc()
			if cur.Val.Agent != pick {
				g.m.takeovers.WithLabelValues("group").Inc()
				g.m.failover.Observe(since.Seconds())
			}
			g.log.Warn("group lease taken over", "job", j.ID, "old_holder", cur.Val.Agent, "old_epoch", cur.Val.Epoch,
				"new_holder", pick, "new_epoch", epoch, "since_last_renewal", since)
		}
		lost = &lostLease{job: j.ID, oldAgent: cur.Val.Agent, newAgent: pick, epoch: epoch}
	case hadPrev:
		// The lease key expired (no controller renewed it for lease_ttl,
		// e.g. an outage): the job had a holder all the same.
		if prev.Agent != pick {
			// Generation 0: whatever generation it has there.
			g.sendUnassign(ctx, j.ID, prev.Agent, 0, "group lease granted to "+pick)
		}
		g.log.Warn("group lease granted again after it expired", "job", j.ID, "old_holder", prev.Agent,
			"old_epoch", prev.Epoch, "new_holder", pick, "new_epoch", epoch)
		lost = &lostLease{job: j.ID, oldAgent: prev.Agent, newAgent: pick, epoch: epoch}
	default:
		g.log.Info("group lease granted", "job", j.ID, "holder", pick, "epoch", epoch)
	}
	delete(g.state.leaving, j.ID)
	if g.sendAssign(ctx, j, pick, epoch, "group lease granted") {
		g.state.sent[j.ID] = sentAssign{agent: pick, epoch: epoch, gen: j.Generation}
	} else {
		delete(g.state.sent, j.ID) // re-sent on the next pass
	}
	return lost
}

// nextEpoch returns an epoch above every epoch granted before: one past
// the last sequence of the ax_leases stream, which only grows (every
// earlier grant is a message of that stream).
func (g *groupLeases) nextEpoch(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := g.js.Stream(ctx, "KV_"+protocol.BucketLeases)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq + 1, nil
}

func (g *groupLeases) sendAssign(ctx context.Context, j protocol.Job, agent string, epoch uint64, reason string) bool {
	cmd := protocol.Command{Kind: protocol.CmdAssign, Agent: agent, Assign: &protocol.Assign{Job: j, Epoch: epoch}}
	if err := g.host.publishCommand(ctx, cmd, ""); err != nil {
		g.log.Error("send assign", "job", j.ID, "agent", agent, "epoch", epoch, "err", err)
		return false
	}
	g.log.Info("job assigned", "job", j.ID, "agent", agent, "generation", j.Generation, "epoch", epoch, "reason", reason)
	return true
}

func (g *groupLeases) sendUnassign(ctx context.Context, jobID, agent string, gen uint64, reason string) {
	cmd := protocol.Command{Kind: protocol.CmdUnassign, Agent: agent, Unassign: &protocol.Unassign{JobID: jobID, Generation: gen, Reason: reason}}
	if err := g.host.publishCommand(ctx, cmd, ""); err != nil {
		g.log.Error("send unassign", "job", jobID, "agent", agent, "err", err)
		return
	}
	g.log.Info("job unassigned", "job", jobID, "agent", agent, "reason", reason)
}
