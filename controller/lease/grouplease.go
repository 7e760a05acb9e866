package lease

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
//     another live member with epoch+1 and has its host take the lost
//     agent's running executions of the job to RETRY_WAITING (reason
//     agent_lost) or FAILED when their attempts are spent
//     (GroupLeaseHost.SettleEpochs).
//   - Every grant is recorded in the job's epoch history (epochs.go)
//     first. A report under an epoch is accepted from the agent that held
//     it, also after the lease moved (a fire made while its lease was
//     valid is a legitimate execution); from any other agent it is refused
//     (ax_reports_rejected_total{reason="not_assigned"}). A report of an
//     older epoch than its execution's record changes nothing
//     (reason="old_epoch").
//   - A pinned job (target.agent) never has a lease and is never moved.

// groupState is the bookkeeping of the group leases (GroupLeases.state),
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

// Lost is a group lease granted again after an earlier grant: it lapsed
// and moved (or went back to the same agent), was handed back, or expired
// from ax_leases while no controller ran. The executions still open under
// an earlier epoch of its job are its host's to settle
// (GroupLeaseHost.SettleEpochs).
type Lost struct {
	Job      string
	OldAgent string // the previous holder ("" when not known)
	NewAgent string
	Epoch    uint64 // the new epoch
}

// GroupLeaseHost is what the group leases ask of the rest of the
// controller.
type GroupLeaseHost interface {
	// PublishCommand publishes cmd to its agent on AX_CMD (msgID "": none).
	PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error
	// ReadJob reads job id from ax_jobs; an error matching ErrJobNotFound
	// says there is none.
	ReadJob(ctx context.Context, id string) (protocol.Job, error)
	// SettleEpochs moves on the executions still open under an earlier
	// epoch of the given leases, granted again. It is called on a
	// goroutine of its own (GroupLeaseEnv.GoRun), not on the ownership
	// loop: it scans every execution.
	SettleEpochs(ctx context.Context, lost []Lost)
}

// GroupLeaseConfig is the group leases' part of the controller's Config.
type GroupLeaseConfig struct {
	LeaseTTL          time.Duration // a lease not renewed for this long has lapsed
	AgentOfflineAfter time.Duration // a member offline this long gets no lease
}

// GroupLeaseMetrics are the controller's metrics the group leases set.
type GroupLeaseMetrics struct {
	Grants    prometheus.Counter     // ax_lease_grants_total
	Expiries  prometheus.Counter     // ax_lease_expiries_total
	Takeovers *prometheus.CounterVec // ax_lease_takeovers_total by kind; the group leases count "group"
	Failover  prometheus.Histogram   // ax_lease_failover_seconds
}

// GroupLeaseEnv is what the group leases are given at construction
// (NewGroupLeases).
type GroupLeaseEnv struct {
	Config  GroupLeaseConfig
	Log     *slog.Logger
	Metrics GroupLeaseMetrics
	Now     func() time.Time // the clock in UTC, as written to KV
	Mono    func() time.Time // the clock lease durations are measured with
	// GoRun runs a function on a goroutine the controller tracks (its
	// context ends with the controller): the follower of ax_epochs and
	// the settling of lost leases.
	GoRun func(func(context.Context))
	// The controller's views: ax_leases, ax_jobs, the agents' registry; and
	// which shards this replica works (Own).
	Leases *View
	Jobs   *jobcache.Cache
	Agents *fleet.Registry
	Own    *Ownership
}

// GroupLeases grants the leases of the group jobs (mode any) of the shards
// this replica works, moves them when they lapse, renews and releases
// them for the agents' heartbeats, and keeps the epoch history (epochs
// holds its view of ax_epochs). It owns the writes of job.<id> in
// ax_leases and of ax_epochs, and the bookkeeping of what it sent (state).
//
// Concurrency: Manage runs on the ownership loop (once a pass, through
// OwnershipHost.ManageGroupLeases), which alone reads and writes state
// (ForgetShard, from the same loop, drops a shard's part); the settling of
// lost leases runs on a goroutine of its own. RenewLeases and
// ReleaseLeases run on the heartbeat workers, EpochHolder and IsMember on
// the report lanes, CurrentHolder on the retry loop: they never touch
// state, only KV and the views (leases, epochs, jobs, agents: each has its
// own lock).
type GroupLeases struct {
	// What NewGroupLeases was given (GroupLeaseEnv), read-only.
	cfg    GroupLeaseConfig
	log    *slog.Logger
	m      GroupLeaseMetrics
	now    func() time.Time
	mono   func() time.Time
	goRun  func(func(context.Context))
	leases *View
	jobs   *jobcache.Cache
	agents *fleet.Registry
	own    *Ownership

	host   GroupLeaseHost
	epochs *epochView // group-job lease grants (epochs.go)
	state  groupState

	// Set by Attach, read-only afterwards.
	ctx context.Context // the controller's: cancelled by Close
	js  jetstream.JetStream
	kv  streams.Buckets
	// leaseKV is ax_leases as the heartbeat path writes it (renewLease):
	// a wrapper of the bucket when the controller's tests delay its
	// writes, else kv.Leases.
	leaseKV jetstream.KeyValue
}

// NewGroupLeases returns the group leases of env, asking host for the
// rest. It does no I/O; Attach and FollowEpochs begin the work.
func NewGroupLeases(env GroupLeaseEnv, host GroupLeaseHost) *GroupLeases {
	return &GroupLeases{
		cfg: env.Config, log: env.Log, m: env.Metrics, now: env.Now, mono: env.Mono, goRun: env.GoRun,
		leases: env.Leases, jobs: env.Jobs, agents: env.Agents, own: env.Own,
		host: host, epochs: newEpochView(), state: newGroupState(),
	}
}

// Attach gives the group leases the controller's context, connection and
// buckets, and ax_leases as the heartbeat path writes it (leaseKV), before
// they load ax_epochs (FollowEpochs). Call it once, before any other
// method but NewGroupLeases.
func (g *GroupLeases) Attach(ctx context.Context, js jetstream.JetStream, kv streams.Buckets, leaseKV jetstream.KeyValue) {
	g.ctx, g.js, g.kv, g.leaseKV = ctx, js, kv, leaseKV
}

// ForgetShard drops the bookkeeping of the jobs of shard n, given away.
// Call it on the ownership loop (OwnershipHost.ForgetShard).
func (g *GroupLeases) ForgetShard(n int) {
	g.state.forgetShard(func(jobID string) bool { return g.own.ShardOf(jobID) == n })
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

// IsMember reports whether agent id is a registered, non-revoked member of
// j's group. Safe for concurrent use.
func (g *GroupLeases) IsMember(j protocol.Job, id string) bool {
	a, ok := g.agents.Get(id)
	return ok && len(fleet.GroupMembers(j, []protocol.AgentInfo{a})) == 1
}

// Manage grants, re-sends and moves the leases of the group jobs in this
// replica's shards, and deletes those of jobs gone (and their epoch
// histories). now is on the Mono clock. Call it on the ownership loop
// (OwnershipHost.ManageGroupLeases), once a pass.
func (g *GroupLeases) Manage(ctx context.Context, now time.Time) {
	if len(g.own.OwnedShards()) == 0 {
		return
	}
	var agents []protocol.AgentInfo // read once, only when a lease is granted
	var lost []Lost
	seen := map[string]bool{}
	for _, j := range g.jobs.GroupAnyJobs() {
		if !g.own.OwnsJob(j.ID) {
			continue
		}
		seen[j.ID] = true
		cur, ok := g.leases.Job(j.ID)
		if ok && !cur.Val.Released && now.Sub(cur.Seen) < g.cfg.LeaseTTL {
			holder := cur.Val.Agent
			if !g.IsMember(j, holder) {
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
		if !g.jobs.Known(id, 0) {
			// Not seen by this replica's cache at all: created on another
			// replica that its watcher has not caught up with, or deleted
			// so long ago that no marker is left. Read it; a live job is
			// in the cache then, and is looked at on the next pass.
			rctx, cancel := context.WithTimeout(ctx, g.cfg.LeaseTTL/2)
			_, err := g.host.ReadJob(rctx, id)
			cancel()
			if !errors.Is(err, ErrJobNotFound) {
				continue
			}
		}
		// Generation 0 removes a deleted job at any generation; a job that
		// changed target keeps its new generation on that agent.
		gen := uint64(0)
		if j, _, ok := g.jobs.Get(id); ok && j.Generation > 0 {
			gen = j.Generation - 1
		}
		g.sendUnassign(ctx, id, cur.Val.Agent, gen, "job no longer leased to a group member")
		if err := g.kv.Leases.Delete(ctx, JobKey(id), jetstream.LastRevision(cur.Rev)); err != nil && !IsCASMiss(err) {
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
		rctx, cancel := context.WithTimeout(ctx, WriteTimeout(g.cfg.LeaseTTL))
		j, err := g.host.ReadJob(rctx, id)
		cancel()
		if errors.Is(err, ErrJobNotFound) || err == nil && !j.GroupAny() {
			g.dropEpochs(ctx, id)
		}
	}
	if len(lost) > 0 {
		// It scans every execution: not on the ownership loop.
		g.goRun(func(ctx context.Context) { g.host.SettleEpochs(ctx, lost) })
	}
}

// grantGroupLease leases j to a live member of its group: with epoch
// above any before, by Create (no lease) or compare-and-set on the lapsed
// lease's revision. The grant is first added to the job's epoch history
// (epochs.go). Every grant after an earlier one — the lease lapsed, was
// handed back, or expired from ax_leases while no controller ran — tells
// the previous holder to stop (unassign) and returns the lease to settle
// (GroupLeaseHost.SettleEpochs); a job's first grant returns nil.
func (g *GroupLeases) grantGroupLease(ctx context.Context, j protocol.Job, cur Seen[Group], had bool, agents []protocol.AgentInfo, now time.Time) *Lost {
	var live []protocol.AgentInfo
	for _, a := range fleet.GroupMembers(j, agents) {
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
	pick := fleet.Rendezvous(j.ID, live)
	epoch, err := g.nextEpoch(ctx)
	if err != nil {
		g.log.Warn("group lease: read epoch", "job", j.ID, "err", err)
		return nil
	}
	if had {
		epoch = max(epoch, cur.Val.Epoch+1)
	}
	prev, hadPrev, err := g.RecordGrant(ctx, j.ID, pick, epoch)
	if err != nil {
		g.log.Warn("group lease: record grant", "job", j.ID, "agent", pick, "err", err)
		return nil
	}
	val := Group{Job: j.ID, Agent: pick, Epoch: epoch, GrantedAt: g.now()}
	data, err := json.Marshal(val)
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout(g.cfg.LeaseTTL))
	defer cancel()
	var rev uint64
	if had {
		rev, err = g.kv.Leases.Update(wctx, JobKey(j.ID), data, cur.Rev)
		if IsCASMiss(err) {
			// Renewed meanwhile (the view catches up), or removed by the
			// bucket TTL: then it is free.
			if _, gerr := g.kv.Leases.Get(wctx, JobKey(j.ID)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				rev, err = g.kv.Leases.Create(wctx, JobKey(j.ID), data)
			}
		}
	} else {
		rev, err = g.kv.Leases.Create(wctx, JobKey(j.ID), data)
	}
	if err != nil && !IsCASMiss(err) {
		// The answer may be lost while the write landed (a timeout on a
		// busy cluster): the grant stands when the key holds it.
		rctx, rcancel := context.WithTimeout(ctx, WriteTimeout(g.cfg.LeaseTTL))
		if e, gerr := g.kv.Leases.Get(rctx, JobKey(j.ID)); gerr == nil {
			var got Group
			if json.Unmarshal(e.Value(), &got) == nil && got.Agent == pick && got.Epoch == epoch {
				rev, err = e.Revision(), nil
			}
		}
		rcancel()
	}
	if err != nil {
		if !IsCASMiss(err) {
			g.log.Warn("grant group lease", "job", j.ID, "agent", pick, "err", err)
		}
		return nil
	}
	g.leases.PutJob(j.ID, val, rev, now)
	g.m.Grants.Inc()
	var lost *Lost
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
			g.m.Expiries.Inc()
			if cur.Val.Agent != pick {
				g.m.Takeovers.WithLabelValues("group").Inc()
				g.m.Failover.Observe(since.Seconds())
			}
			g.log.Warn("group lease taken over", "job", j.ID, "old_holder", cur.Val.Agent, "old_epoch", cur.Val.Epoch,
				"new_holder", pick, "new_epoch", epoch, "since_last_renewal", since)
		}
		lost = &Lost{Job: j.ID, OldAgent: cur.Val.Agent, NewAgent: pick, Epoch: epoch}
	case hadPrev:
		// The lease key expired (no controller renewed it for lease_ttl,
		// e.g. an outage): the job had a holder all the same.
		if prev.Agent != pick {
			// Generation 0: whatever generation it has there.
			g.sendUnassign(ctx, j.ID, prev.Agent, 0, "group lease granted to "+pick)
		}
		g.log.Warn("group lease granted again after it expired", "job", j.ID, "old_holder", prev.Agent,
			"old_epoch", prev.Epoch, "new_holder", pick, "new_epoch", epoch)
		lost = &Lost{Job: j.ID, OldAgent: prev.Agent, NewAgent: pick, Epoch: epoch}
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
func (g *GroupLeases) nextEpoch(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := g.js.Stream(ctx, "KV_"+protocol.BucketLeases)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq + 1, nil
}

func (g *GroupLeases) sendAssign(ctx context.Context, j protocol.Job, agent string, epoch uint64, reason string) bool {
	cmd := protocol.Command{Kind: protocol.CmdAssign, Agent: agent, Assign: &protocol.Assign{Job: j, Epoch: epoch}}
	if err := g.host.PublishCommand(ctx, cmd, ""); err != nil {
		g.log.Error("send assign", "job", j.ID, "agent", agent, "epoch", epoch, "err", err)
		return false
	}
	g.log.Info("job assigned", "job", j.ID, "agent", agent, "generation", j.Generation, "epoch", epoch, "reason", reason)
	return true
}

func (g *GroupLeases) sendUnassign(ctx context.Context, jobID, agent string, gen uint64, reason string) {
	cmd := protocol.Command{Kind: protocol.CmdUnassign, Agent: agent, Unassign: &protocol.Unassign{JobID: jobID, Generation: gen, Reason: reason}}
	if err := g.host.PublishCommand(ctx, cmd, ""); err != nil {
		g.log.Error("send unassign", "job", jobID, "agent", agent, "err", err)
		return
	}
	g.log.Info("job unassigned", "job", jobID, "agent", agent, "reason", reason)
}
