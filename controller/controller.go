package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/controller/placement"
	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/clock"
)

// Controller is the ax controller: embedded (or external) NATS, jobs,
// executions and their state machine, retries, agents and the commands
// that reach them. Make one with New, then Start it.
//
// Its methods are the controller's API (the HTTP layer's Backend) and
// its lifecycle; each is a short entry into the part that does the work
// (parts.go).
type Controller struct {
	*core
}

// core is what every part of the controller shares: the configuration,
// the stores and caches, the lease and fleet components and the parts
// themselves (parts.go), and the lifecycle that starts and stops them.
// The parts embed it; one core exists per Controller.
type core struct {
	cfg Config
	log *slog.Logger
	clk clock.Clock
	m   *metrics

	// Set once by Start, read-only afterwards (guarded by the ready flag).
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	kv  streams.Buckets
	// markerTTL is the TTL of the purge markers that remove records from
	// ax_execs, ax_jobs and ax_idem (retention.MarkerTTL); 0 on a server
	// without per-message TTLs, where the sweeper purges them.
	markerTTL time.Duration
	natsURL   string
	// kvGuard keeps server reloads apart from KV reads (kvguard.go).
	kvGuard reloadGuard

	jobs *jobcache.Cache
	// fleet answers the agents' registrations and heartbeats and owns
	// their registry (package fleet); agents is that registry, read here
	// to place jobs.
	fleet     *fleet.Fleet
	agents    *fleet.Registry
	consumers consumerCheck // online agents without a command consumer (consumers.go)
	retries   *retrier
	hist      *history // the execution history index (history.go)

	// Leases (package lease): the view of ax_leases; own holds the shard
	// leases and says which shards this replica works
	// (lease.OwnershipHost is what it asks of the controller); groups
	// grants and renews the group-job leases and keeps their epochs
	// (lease.GroupLeaseHost).
	leases *lease.View
	own    *lease.Ownership
	groups *lease.GroupLeases
	// ingest takes the agents' reports in: the per-shard report consumers
	// and lanes, report authorization, the report stream's upkeep
	// (package ingest; ingest.Host is what it asks of the controller).
	ingest *ingest.Ingest
	// place decides which agents run a job, sends the assignment diffs
	// and keeps the executions waiting for an agent of their group
	// (package placement; placement.Host is what it asks of the
	// controller).
	place *placement.Placer
	// ret moves finished work out of live state into history: terminal
	// executions past the live grace, the one-shot jobs whose executions
	// all left, the history index's rows past the retention (package
	// retention; retention.Host is what it asks of the controller).
	ret *retention.Retention
	// driver sends the commands of a stored job change from the replica
	// that works the job's shard (package driver; driverHostOf is what it
	// asks of the controller).
	driver   *driver.Driver
	instance string // this process, in its leases and liveness digests
	crashed  atomic.Bool
	// storeFail is closed when the embedded server can no longer write its
	// store (storefailed.go).
	storeFail *storeFailure

	// assignMu serializes assignment decisions (job changes and agent
	// registrations) and guards the placement's executions waiting for an
	// agent. The placement and the fleet are given it (placement.Env.Assign,
	// fleet.Env.Assign); the fleet takes it after an agent's lock.
	assignMu sync.Mutex
	// marks tracks the changes this replica makes to executions on its
	// own, for its write mark in ax_marks (writemarks.go).
	marks  *writemark.Tracker
	evMemo eventMemo // events published, for the history follower (eventmemo.go)
	evHold eventHold // PENDING events of one-shot creates, held (eventhold.go)
	// resends runs the resends of runs after agents' store losses, one
	// per agent at a time and per storeLossResendEvery (resendgate.go).
	resends resendGate
	// idRand draws the random part of new job ids: math/rand/v2's Uint32
	// (a test draws its own).
	idRand func() uint32
	hooks  testHooks

	parts

	lifeMu sync.Mutex
	state  lifeState
	// startCancel and startDone are set while Start runs: Close during
	// Start cancels it and waits for it (controller.go, shutdown.go).
	startCancel context.CancelFunc
	startDone   chan struct{}
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	subs        []*nats.Subscription
	closeCh     chan struct{}
}

// testHooks are nil in production; the package's tests set them to hold
// a step up or to wrap a store.
type testHooks struct {
	// beforeReload runs at the start of every reloadExecutions.
	beforeReload func(ctx context.Context)
	// beforeJobDispatch runs when a stored job change is about to be
	// dispatched (onJobChanged), to hold a kill -9 between the two.
	beforeJobDispatch func()
	// wrapKV wraps ax_agents and ax_leases as the heartbeat path writes
	// them (the fleet, the group-lease renewals), to delay the writes.
	wrapKV func(jetstream.KeyValue) jetstream.KeyValue
	// wrapJobsKV wraps ax_jobs as the job cache follows it (its watcher),
	// to hold the watcher's updates back.
	wrapJobsKV func(jetstream.KeyValue) jetstream.KeyValue
	// historyReleased runs after the history follower freed the index
	// writer's page cache.
	historyReleased func()
}

type lifeState int

const (
	lifeNew lifeState = iota
	lifeStarting
	lifeReady
	lifeClosed
)

// New checks cfg, fills its defaults and registers the metrics. It does no I/O.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	c := &core{
		cfg:       cfg,
		log:       cfg.Logger,
		clk:       cfg.Clock,
		m:         m,
		closeCh:   make(chan struct{}),
		storeFail: newStoreFailure(),
		idRand:    mrand.Uint32,
	}
	c.jobs = jobcache.New(c.now)
	c.marks = writemark.New(c.now)
	c.resends = resendGate{every: max(cfg.storeLossResendEvery, 0), mono: c.mono,
		sleep: func(ctx context.Context, d time.Duration) bool { return clock.Sleep(ctx, c.clk, d) }}
	c.leases = lease.NewView()
	var id [6]byte
	_, _ = rand.Read(id[:])
	c.instance = hex.EncodeToString(id[:])
	c.own = lease.NewOwnership(lease.OwnershipEnv{
		Config: lease.OwnershipConfig{Node: cfg.Node, Shards: cfg.Shards, LeaseTTL: cfg.LeaseTTL,
			LeaseRenewInterval: cfg.LeaseRenewInterval},
		Log: c.log, Metrics: lease.OwnershipMetrics{ShardsOwned: m.shardsOwned, Takeovers: m.takeovers},
		Clock: c.clk, Now: c.now, Mono: c.mono, GoRun: c.goRun,
		Leases: c.leases, Instance: c.instance, Started: cfg.Clock.Now().UTC().Round(0),
	}, ownershipHostOf{c})
	c.fleet = fleet.New(fleet.Env{
		Config: fleet.Config{Node: cfg.Node, DataDir: cfg.DataDir, Auth: cfg.NATS.Auth, Shards: cfg.Shards,
			HeartbeatInterval: cfg.HeartbeatInterval, AgentOfflineAfter: cfg.AgentOfflineAfter,
			UnboundedAgentRates: cfg.unboundedAgentRates},
		Log: c.log,
		Metrics: fleet.Metrics{AgentsOnline: m.agentsOnline, AgentsKnown: m.agentsKnown, LabelsIgnored: m.labelsIgnored,
			StoreResets: m.storeResets, AgentRefused: m.agentRefused, AgentStats: m.agentStats, ForgetAgent: m.forgetAgent},
		Clock: c.clk, Now: c.now, Mono: c.mono, GoRun: c.goRun, Every: c.every,
		Follow: func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error {
			return kvfollow.Follow(ctx, w, apply, 1, c.goRun)
		},
		Instance: c.instance, Assign: &c.assignMu,
	}, fleetHostOf{c})
	c.agents = c.fleet.Registry()
	c.groups = lease.NewGroupLeases(lease.GroupLeaseEnv{
		Config: lease.GroupLeaseConfig{LeaseTTL: cfg.LeaseTTL, AgentOfflineAfter: cfg.AgentOfflineAfter},
		Log:    c.log,
		Metrics: lease.GroupLeaseMetrics{Grants: m.leaseGrants, Expiries: m.leaseExpiries, Takeovers: m.takeovers,
			Failover: m.failover},
		Now: c.now, Mono: c.mono, GoRun: c.goRun,
		Leases: c.leases, Jobs: c.jobs, Agents: c.agents, Own: c.own,
	}, groupLeaseHostOf{c})
	c.ingest = ingest.New(ingest.Env{
		Config: ingest.Config{Shards: cfg.Shards, AckWait: cfg.AckWait, LeaseTTL: cfg.LeaseTTL,
			Replicas: cfg.NATS.Replicas, ReportSweep: cfg.reportSweep},
		Log: c.log,
		Metrics: ingest.Metrics{ReportsApplied: m.reportsApplied, ReportsRejected: m.reportsRejected, Deferred: m.deferred, StrayUnassigns: m.strayUnassigns,
			Applied: &m.applied, Rejected: &m.rejected,
			StreamBytes: m.rptBytes, StreamMaxBytes: m.rptMaxBytes, StreamMsgs: m.rptMsgs, StreamOldest: m.rptOldest,
			StreamMaxAge: m.rptMaxAge, StreamAckedRemoved: m.rptAckedRemoved, ConsumersRemade: m.rptRemade, ConsumersReset: m.rptReset},
		Now: c.now, Mono: c.mono, Every: c.every,
		Jobs: c.jobs, Groups: c.groups, Own: c.own,
	}, ingestHostOf{c})
	c.place = placement.New(placement.Env{
		Config: placement.Config{AgentOfflineAfter: cfg.AgentOfflineAfter},
		Log:    c.log, Now: c.now, Assign: &c.assignMu,
		Jobs: c.jobs, Agents: c.agents, Marks: c.marks,
	}, placementHostOf{c})
	c.ret = retention.New(retention.Env{
		Config: retention.Config{Grace: c.liveGrace(), HistoryRetention: cfg.History.Retention,
			Sweep: cfg.historySweep, Batch: cfg.historySweepBatch, Budget: cfg.historySweepBudget},
		Log: c.log, Now: c.now, Mono: c.mono, Every: c.every,
		Jobs: c.jobs, Own: c.own, Metrics: retention.Metrics{Removed: c.m.retRemoved, Passes: c.m.retPasses},
	}, retentionHostOf{c})
	c.driver = driver.New(driver.Env{
		Config: driver.Config{Instance: c.instance, Timeout: cfg.Forward.Timeout, Hold: cfg.Forward.Hold},
		Log:    c.log,
		Count:  func(r driver.Route) { m.jobChanges.WithLabelValues(string(r)).Inc() },
		Owner:  c.own, GoRun: c.goRun, Mono: c.mono,
	}, driverHostOf{c})
	c.parts = newParts(c)
	return &Controller{core: c}, nil
}

// Registry returns the registry the controller's metrics are registered on.
func (c *Controller) Registry() *prometheus.Registry { return c.cfg.Registry }

// NATSURL returns the client URL agents connect to ("" before Start).
func (c *Controller) NATSURL() string {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	return c.natsURL
}

// Start runs the embedded NATS server (unless NATS.URL is set), ensures the
// streams and buckets, loads jobs and agents, reloads retry timers, starts
// the report consumers and the registration and heartbeat responders. It
// returns when the controller is ready; on error everything started is
// stopped again.
func (c *Controller) Start(ctx context.Context) error {
	c.lifeMu.Lock()
	if c.state != lifeNew {
		c.lifeMu.Unlock()
		return fmt.Errorf("start: %w: already started or closed", ErrNotReady)
	}
	c.state = lifeStarting
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.startCancel, c.startDone = cancel, make(chan struct{})
	defer close(c.startDone)
	c.lifeMu.Unlock()

	if err := c.start(ctx); err != nil {
		c.shutdown()
		c.lifeMu.Lock()
		c.state = lifeClosed
		c.lifeMu.Unlock()
		return err
	}
	c.lifeMu.Lock()
	c.state = lifeReady
	c.lifeMu.Unlock()
	c.log.Info("controller ready", "nats", c.natsURL, "shards", c.cfg.Shards, "node", c.cfg.Node)
	return nil
}

func (c *core) start(ctx context.Context) error {
	if c.cfg.NATS.URL == "" {
		if err := c.fleet.OpenAuth(c.kvGuard.reload); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		t0 := c.mono()
		srv, opts, err := startEmbedded(c.cfg, c.fleet.Auth(), natsLogger{log: c.log, storeFailed: c.onStoreFailed})
		if err != nil {
			return err
		}
		c.log.Debug("start step done", "step", "embedded NATS server", "took", c.mono().Sub(t0))
		c.srv = srv
		c.fleet.Auth().SetServer(srv, opts)
	}
	nc, js, err := connect(c.cfg, c.srv, func(err error) {
		if streams.IsWrongLastSeq(err) {
			return // a batched execution write lost its compare-and-set; the lane retries it
		}
		c.log.Warn("async publish failed", "err", err)
	}, c.fleet.Auth().ConnectOptions()...)
	if err != nil {
		return err
	}
	c.nc, c.js = nc, js
	c.lifeMu.Lock()
	if c.srv != nil {
		c.natsURL = c.srv.ClientURL()
	} else {
		c.natsURL = c.cfg.NATS.URL
	}
	c.lifeMu.Unlock()

	if err := c.retryStart(ctx, "check lease TTL", c.checkLeaseTTL); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	var b streams.Buckets
	err = c.retryStart(ctx, "ensure streams", func(ctx context.Context) (err error) {
		// AX_EVT keeps events as long as the history keeps executions
		// (the live grace in live state, then history.retention; the index
		// is rebuilt from it): a short history.retention keeps the data
		// dir small instead of holding a week of events nobody reads.
		// AX_RPT de-duplicates Msg-Ids for reports.dedup_window, the live
		// grace; AX_CMD and AX_EVT, which only controllers publish to, for
		// controllerDedupWindow (an existing store's streams are updated to
		// both).
		b, err = streams.Ensure(ctx, js, streams.Config{Replicas: c.cfg.NATS.Replicas, LeaseTTL: c.cfg.LeaseTTL,
			ReportMaxBytes: c.cfg.Reports.MaxBytes, ReportMaxAge: c.cfg.Reports.MaxAge, ReportShards: c.cfg.Shards,
			ReportMaxPerSubject: c.cfg.Reports.MaxPerSubject, Duplicates: c.cfg.Reports.DedupWindow,
			ControllerDuplicates: c.controllerDedupWindow(),
			EventMaxAge:          c.liveGrace() + c.cfg.History.Retention})
		return err
	})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	c.kv = c.kvGuard.guard(b)
	if b.MsgTTL {
		c.markerTTL = retention.MarkerTTL(c.cfg.historySweep)
	}
	// The mark is stored before anything writes an execution record, so
	// that a process killed after its first write has left its key.
	if err := c.retryStart(ctx, "store write mark", c.storeMark); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	c.goRun(c.marksLoop)
	c.fleet.Attach(c.ctx, c.nc, c.js, c.kv)
	if err := c.retryStart(ctx, "open history", c.openHistory); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	jobsKV := c.kv.Jobs
	if c.hooks.wrapJobsKV != nil {
		jobsKV = c.hooks.wrapJobsKV(jobsKV)
	}
	if err := c.retryStart(ctx, "load jobs", func(ctx context.Context) error {
		return c.jobs.Follow(ctx, c.ctx, jobsKV, c.log, c.goRun)
	}); err != nil {
		return fmt.Errorf("start: load jobs: %w", err)
	}
	// The markers the load found (jobs deleted by an earlier version, or
	// whose purge a crash cut off) go to the sweeper too, which purges
	// those of its shards whose executions all left (retention.NoteDeleted).
	for _, id := range c.jobs.Deleted() {
		c.ret.NoteDeleted(id)
	}
	if err := c.retryStart(ctx, "load agents", c.fleet.LoadAgents); err != nil {
		return fmt.Errorf("start: load agents: %w", err)
	}
	r, err := newRetrier(c)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	c.retries = r
	c.goRun(r.run)
	c.ingest.Attach(c.ctx, c.nc, c.js, c.ex.execs())
	if err := c.retryStart(ctx, "report consumers", c.ensureConsumers); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := c.retryStart(ctx, "load leases", c.followLeases); err != nil {
		return fmt.Errorf("start: load leases: %w", err)
	}
	agentsKV, leaseKV := c.kv.Agents, c.kv.Leases
	if c.hooks.wrapKV != nil {
		agentsKV, leaseKV = c.hooks.wrapKV(agentsKV), c.hooks.wrapKV(leaseKV)
	}
	c.groups.Attach(c.ctx, c.js, c.kv, leaseKV)
	if err := c.retryStart(ctx, "load lease grants", c.groups.FollowEpochs); err != nil {
		return fmt.Errorf("start: load lease grants: %w", err)
	}
	subs, err := c.fleet.StartResponders(agentsKV)
	c.subs = append(c.subs, subs...)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := c.startGateway(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	dsub, err := c.driver.Serve(c.ctx, c.nc)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	c.subs = append(c.subs, dsub)
	// The first pass takes the free shards (all of them for a lone
	// replica) before Start returns; the loop keeps them.
	c.own.Start(ctx, c.kv.Leases)
	if c.srv != nil {
		c.goRun(c.watchJetStream)
	}
	c.goRun(c.fleet.LivenessLoop)
	c.goRun(c.fleet.DigestLoop)
	c.goRun(c.consumerLoop)
	c.goRun(c.ex.heldLoop)
	c.goRun(c.ingest.ReportStreamLoop)
	c.ret.Attach(c.js, c.kv.Idem, c.ex.execs(), c.hist.idx)
	c.goRun(c.ret.Loop)
	c.goRun(c.reloader.marksSweepLoop)
	c.goRun(newCommandPruner(c).loop)
	return nil
}

// ensureConsumers is the ingest's EnsureConsumers; a shard count other
// than the one the report consumers were made for is a config error of
// key shards.
func (c *core) ensureConsumers(ctx context.Context) error {
	err := c.ingest.EnsureConsumers(ctx)
	if errors.Is(err, ingest.ErrShardCount) {
		return configErr("shards", "%s", err.Error())
	}
	return err
}

// ShardOwners returns, for each shard, the node holding its lease ("" when
// none), as this replica sees ax_leases now.
func (c *Controller) ShardOwners() []string { return c.own.ShardOwners() }

// goRun runs fn on a goroutine tracked by Close.
func (c *core) goRun(fn func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
	}()
}

// kvErr maps KV errors to the controller's sentinels.
func kvErr(op string, err error) error {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}
