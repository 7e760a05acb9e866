package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/pkg/protocol"
)

// parts are the controller's components (the execution state machine and
// store, the history index, the job cache, the lease view with the shard
// ownership and the group leases, the fleet, the report ingest, the
// placement and the retention are packages of their own:
// controller/execution, controller/execstore, controller/histindex,
// controller/jobcache, controller/lease, controller/fleet,
// controller/ingest, controller/placement, controller/retention). Each
// owns one concern and its files; they share the core (the
// configuration, stores, caches and the lease, fleet, ingest, placement
// and retention components) and call each other through these fields, so
// a call that crosses a concern names the part it enters.
//
//	jobsvc    jobs: create (one-shot fast path, batch), read, update,
//	          pause, delete, idempotency keys, the dispatch of a stored
//	          change (jobs.go, jobsbatch.go, createoneshot.go, dispatch.go)
//	ex        executions: the one Apply and its effects, the execution
//	          store and scans, events and commands out, operator retry and
//	          cancel, retry timers that fire, the executions of a fire
//	          (createRuns) and the cancel of a deleted job's run
//	          (execapply.go, effects.go, execs.go, execscan.go,
//	          executions.go, retries.go, dispatch.go, deletedruns.go),
//	          the refusal of reports of what left live state (inHistory,
//	          history.go)
//	reloader  the reload of a shard's live executions at acquisition
//	          (reload.go, sentruns.go, historyrepair.go)
//	agentsvc  what the fleet (controller/fleet) and the group leases
//	          (controller/lease) ask of the rest: lost epochs settled,
//	          the last command sent to an agent and runs re-sent after it
//	          lost its store, the leases and command consumers of agent
//	          listings (leasesettle.go, storeloss.go, agentlist.go)
//
// Reports in (the per-shard consumers and lanes, report authorization,
// the report stream's upkeep) are the ingest's (controller/ingest,
// core.ingest); ingestHostOf answers what it asks of the parts.
// Placement (which agents run a job, the assignment diffs, the agent of
// each execution of a fire, the executions waiting for an agent of their
// group) is the placement's (controller/placement, core.place);
// placementHostOf answers what it asks of the parts.
// Retention (the sweeper that moves terminal executions and finished
// one-shot jobs out of live state into history) is the retention's
// (controller/retention, core.ret); retentionHostOf answers what it asks
// of the parts.
type parts struct {
	jobsvc   *jobService
	ex       *execService
	reloader *reloader
	agentsvc *agentService
}

// newParts makes the parts of c.
func newParts(c *core) parts {
	return parts{
		jobsvc:   &jobService{c},
		ex:       &execService{c},
		reloader: &reloader{c},
		agentsvc: &agentService{c},
	}
}

// jobService creates, reads, changes and deletes jobs.
type jobService struct{ *core }

// execService changes executions (through execution.Apply and the
// execution store) and carries out the effects.
type execService struct{ *core }

// reloader loads a shard's live executions when this replica acquires it.
type reloader struct{ *core }

// agentService is what the fleet and the group leases ask of the rest of
// the controller.
type agentService struct{ *core }

// ownershipHostOf answers the shard ownership's lease.OwnershipHost from
// the parts that own each step.
type ownershipHostOf struct{ *core }

// StartShardWorker is the ingest's StartShardWorker (controller/ingest).
func (h ownershipHostOf) StartShardWorker(ctx context.Context, n int) (lease.ShardWorker, error) {
	return h.ingest.StartShardWorker(ctx, n)
}

func (h ownershipHostOf) ReloadExecutions(ctx context.Context, shards map[int]bool) error {
	return h.reloader.reloadExecutions(ctx, shards)
}

// ForgetShard publishes the held PENDING events of shard n's executions
// (eventhold.go: before the lease is released, so that the new owner's
// events of them come after), and drops the retry timers (the
// execService's) and the group-lease bookkeeping of the jobs of shard n,
// no longer worked here (its new owner reloads them).
func (h ownershipHostOf) ForgetShard(n int) {
	h.ex.publishHeldOfShard(context.Background(), n)
	if h.retries != nil {
		h.retries.dropWhere(func(jobID string) bool { return h.own.ShardOf(jobID) == n })
	}
	h.groups.ForgetShard(n)
}

// ManageGroupLeases is the group leases' pass of the ownership loop
// (lease.GroupLeases.Manage).
func (h ownershipHostOf) ManageGroupLeases(ctx context.Context, now time.Time) {
	h.groups.Manage(ctx, now)
}

// PlaceWaiting is the placement's PlaceWaiting.
func (h ownershipHostOf) PlaceWaiting(ctx context.Context, now time.Time) {
	h.place.PlaceWaiting(ctx, now)
}

// fleetHostOf answers the fleet's fleet.Host.
type fleetHostOf struct{ *core }

// ReconcileAgent is the placement's ReconcileAgent.
func (h fleetHostOf) ReconcileAgent(ctx context.Context, prev *protocol.AgentInfo, cur protocol.AgentInfo, resend bool) {
	h.place.ReconcileAgent(ctx, prev, cur, resend)
}

// PlaceUnplaced is the placement's PlaceUnplaced.
func (h fleetHostOf) PlaceUnplaced(ctx context.Context, a protocol.AgentInfo) {
	h.place.PlaceUnplaced(ctx, a)
}

// LastCommandSeq is the agentService's lastCommandSeq (storeloss.go).
func (h fleetHostOf) LastCommandSeq(ctx context.Context, agent string) (uint64, error) {
	return h.agentsvc.lastCommandSeq(ctx, agent)
}

// ResendRuns is the agentService's resendRuns (storeloss.go).
func (h fleetHostOf) ResendRuns(ctx context.Context, agent string, after uint64) {
	h.resends.request(ctx, agent, after, func(ctx context.Context, after uint64) { h.agentsvc.resendRuns(ctx, agent, after) })
}

// RenewLeases is the group leases' RenewLeases (controller/lease).
func (h fleetHostOf) RenewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) ([]protocol.Lease, []protocol.HeldLease) {
	return h.groups.RenewLeases(ctx, a, claims)
}

// ReleaseLeases is the group leases' ReleaseLeases (controller/lease).
func (h fleetHostOf) ReleaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease) {
	h.groups.ReleaseLeases(ctx, agent, claims)
}

// groupLeaseHostOf answers the group leases' lease.GroupLeaseHost.
type groupLeaseHostOf struct{ *core }

// PublishCommand is the execService's publishCommand.
func (h groupLeaseHostOf) PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error {
	return h.ex.publishCommand(ctx, cmd, msgID)
}

// ReadJob is the jobService's readJob; its ErrNotFound also matches
// lease.ErrJobNotFound.
func (h groupLeaseHostOf) ReadJob(ctx context.Context, id string) (protocol.Job, error) {
	j, _, err := h.jobsvc.readJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return j, fmt.Errorf("%w: %w", lease.ErrJobNotFound, err)
	}
	return j, err
}

// SettleEpochs is the agentService's settleEpochs (leasesettle.go).
func (h groupLeaseHostOf) SettleEpochs(ctx context.Context, lost []lease.Lost) {
	h.agentsvc.settleEpochs(ctx, lost)
}

// ingestHostOf answers the report ingest's ingest.Host.
type ingestHostOf struct{ *core }

// PublishCommand is the execService's publishCommand.
func (h ingestHostOf) PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error {
	return h.ex.publishCommand(ctx, cmd, msgID)
}

// ReadJob is the jobService's readJob; its ErrNotFound also matches
// ingest.ErrJobNotFound.
func (h ingestHostOf) ReadJob(ctx context.Context, id string) (protocol.Job, error) {
	j, _, err := h.jobsvc.readJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return j, fmt.Errorf("%w: %w", ingest.ErrJobNotFound, err)
	}
	return j, err
}

// JobEnv is the execService's jobEnv.
func (h ingestHostOf) JobEnv(ctx context.Context, jobID string) (execution.Env, error) {
	return h.ex.jobEnv(ctx, jobID)
}

// InHistory is the execService's inHistory (history.go).
func (h ingestHostOf) InHistory(ctx context.Context, id string) (protocol.Execution, bool) {
	return h.ex.inHistory(ctx, id)
}

// StartEffects is the execService's startEffects of a report: no job (a
// report's effects send no command), and its error, which only a command
// can cause, dropped.
func (h ingestHostOf) StartEffects(ctx context.Context, rec *execution.Record, effs []execution.Effect) ([]jetstream.PubAckFuture, bool) {
	futs, evErr, _ := h.ex.startEffects(ctx, rec, nil, effs)
	return futs, evErr
}

// placementHostOf answers the placement's placement.Host. The placement
// calls it with the assign lock held.
type placementHostOf struct{ *core }

// PublishCommand is the execService's publishCommand.
func (h placementHostOf) PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error {
	return h.ex.publishCommand(ctx, cmd, msgID)
}

// ApplyExec is the execService's applyExec with an empty execution.Env
// (the time is set there), without the record before.
func (h placementHostOf) ApplyExec(ctx context.Context, execID string, ev execution.Event) (*execution.Record, []execution.Effect, error) {
	_, after, effs, err := h.ex.applyExec(ctx, execID, ev, execution.Env{})
	return after, effs, err
}

// ExecEffects is the execService's execEffects.
func (h placementHostOf) ExecEffects(ctx context.Context, rec *execution.Record, job *protocol.Job, effs []execution.Effect) error {
	return h.ex.execEffects(ctx, rec, job, effs)
}

// SeeJob is the jobService's seeJob (knownjob.go).
func (h placementHostOf) SeeJob(ctx context.Context, id string) error {
	return h.jobsvc.seeJob(ctx, id)
}

// CancelDeletedJobRun is the execService's cancelDeletedJobRun
// (deletedruns.go).
func (h placementHostOf) CancelDeletedJobRun(ctx context.Context, execID, jobID string, unsent bool) (bool, error) {
	return h.ex.cancelDeletedJobRun(ctx, execID, jobID, unsent)
}

// retentionHostOf answers the retention's retention.Host.
type retentionHostOf struct{ *core }

// ReadJob is the jobService's readJob; its ErrNotFound also matches
// retention.ErrJobNotFound.
func (h retentionHostOf) ReadJob(ctx context.Context, id string) (protocol.Job, uint64, error) {
	j, rev, err := h.jobsvc.readJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return j, rev, fmt.Errorf("%w: %w", retention.ErrJobNotFound, err)
	}
	return j, rev, err
}

// IndexUpToDate is the history index's upToDate (history.go).
func (h retentionHostOf) IndexUpToDate(ctx context.Context) bool {
	return h.hist.upToDate(ctx)
}

// driverHostOf answers what the job-change driver (controller/driver)
// asks of the parts.
type driverHostOf struct{ *core }

// Dispatch is the jobService's dispatchChange.
func (h driverHostOf) Dispatch(ctx context.Context, ch driver.Change) {
	h.jobsvc.dispatchChange(ctx, ch)
}
