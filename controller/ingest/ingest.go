package ingest

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/pkg/protocol"
)

// Host is what the ingest asks of the rest of the controller: a job read
// from ax_jobs, the environment of a change to an execution, whether an
// execution left live state, the effects of an applied report, and the
// publish of a stray job's unassign.
type Host interface {
	// ReadJob reads job id from ax_jobs (not the cache); a job that does
	// not exist is an error matching ErrJobNotFound.
	ReadJob(ctx context.Context, id string) (protocol.Job, error)
	// JobEnv returns the execution.Env of a change to an execution of job
	// jobID (its retry policy, the jitter source, Now set to the
	// controller's time). Called once per execution of a batch. A job the
	// cache has not seen is read from ax_jobs first; an error is that read
	// failing, and the reports are applied later (the policy of a job not
	// seen yet is not the default one).
	JobEnv(ctx context.Context, jobID string) (execution.Env, error)
	// InHistory reports whether execution id, which has no live record,
	// left live state for the history index, and returns it as the index
	// has it.
	InHistory(ctx context.Context, id string) (protocol.Execution, bool)
	// StartEffects starts the effects of one applied (or duplicate) report
	// for rec, the record written or the current one: its events,
	// published asynchronously (their futures returned; evErr when one
	// could not be sent at all), and its retry timers. A report's effects
	// are never commands. Called once per report.
	StartEffects(ctx context.Context, rec *execution.Record, effs []execution.Effect) (futs []jetstream.PubAckFuture, evErr bool)
	// PublishCommand validates and publishes cmd to its agent's subject,
	// with Msg-Id msgID, and waits for its acknowledgement: the unassign
	// of a stray job (stray.go).
	PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error
}

// Config is the ingest's part of the controller's Config.
type Config struct {
	// Shards is the configured report shard count (fixed once the
	// report consumers exist).
	Shards int
	// AckWait is how long a report may stay unacknowledged before it is
	// redelivered; a report ahead of its record waits up to three of it.
	AckWait time.Duration
	// LeaseTTL is the agents' clock slack of a fire under a lease or of
	// a deleted job (reportauth.go).
	LeaseTTL time.Duration
	// Replicas are the report consumers' replicas (nats.replicas).
	Replicas int
	// ReportSweep is how often AX_RPT is looked at (reportstream.go);
	// 0: every 10s.
	ReportSweep time.Duration
}

// Metrics are the controller's metrics the ingest sets. None may be nil.
type Metrics struct {
	ReportsApplied  prometheus.Counter     // ax_reports_applied_total
	ReportsRejected *prometheus.CounterVec // ax_reports_rejected_total, by reason (Reject*)
	Deferred        prometheus.Counter     // ax_reports_deferred_total
	StrayUnassigns  prometheus.Counter     // ax_stray_unassigns_total (stray.go)
	// Applied and Rejected mirror ReportsApplied and ReportsRejected (all
	// reasons) for tests and benchmarks.
	Applied, Rejected *atomic.Int64
	// AX_RPT as of the upkeep's last look: ax_report_stream_bytes,
	// _max_bytes, _messages, _oldest_seconds, _max_age_seconds, and
	// ax_report_stream_acked_removed_total.
	StreamBytes, StreamMaxBytes, StreamMsgs, StreamOldest, StreamMaxAge prometheus.Gauge
	StreamAckedRemoved                                                  prometheus.Counter
	// ConsumersRemade counts the report consumers a shard worker made
	// again after they were gone: ax_report_consumers_remade_total.
	ConsumersRemade prometheus.Counter
	// ConsumersReset counts the report consumers a shard worker deleted
	// and made again as it started, because an earlier reader left
	// reports unacknowledged (consumerReader.reset):
	// ax_report_consumers_reset_total.
	ConsumersReset prometheus.Counter
}

// Env is what the ingest is given at construction (New): its
// configuration, metrics and the controller's plain dependencies.
type Env struct {
	Config  Config
	Log     *slog.Logger
	Metrics Metrics
	Now     func() time.Time // the clock in UTC, as written to KV
	Mono    func() time.Time // the clock a report's linger is measured with
	// Every runs step first after first, then every interval, until ctx
	// ends, logging its errors as what.
	Every func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	// Jobs is the controller's job cache (read only).
	Jobs *jobcache.Cache
	// Groups are the group leases: who held an epoch, group membership.
	Groups *lease.GroupLeases
	// Own is the shard ownership: whether this replica works shard 0
	// (the report stream's upkeep).
	Own *lease.Ownership
}

// Ingest takes the agents' reports in: the per-shard report consumers
// and their lanes, report authorization, and the report stream's upkeep.
// Make one with New; the controller gives it its connection with Attach,
// then EnsureConsumers, and the shard ownership starts the workers
// (StartShardWorker).
type Ingest struct {
	cfg    Config
	log    *slog.Logger
	m      Metrics
	now    func() time.Time
	mono   func() time.Time
	every  func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	jobs   *jobcache.Cache
	groups *lease.GroupLeases
	own    *lease.Ownership
	host   Host

	created createdExecs // records CreateJob wrote (createdcache.go)
	acks    *ackKeeper   // applied reports acknowledged one behind (ackkeep.go)
	strays  strays       // the stray unassigns of the window (stray.go)
	// decode decodes reports, strictjson first (protocol.Decoder).
	decode protocol.Decoder

	// Set by Attach, read-only afterwards.
	ctx   context.Context // the controller's: cancelled by Close
	nc    *nats.Conn
	js    jetstream.JetStream
	execs execstore.Store
}

// New returns the ingest of e, asking host for the rest.
func New(e Env, host Host) *Ingest {
	return &Ingest{
		cfg: e.Config, log: e.Log, m: e.Metrics, now: e.Now, mono: e.Mono, every: e.Every,
		jobs: e.Jobs, groups: e.Groups, own: e.Own, host: host,
		decode: protocol.Decoder{Fast: strictjson.Unmarshal},
		acks:   newAckKeeper(e.Config.AckWait),
	}
}

// Attach gives the ingest the controller's context (its workers end with
// it), connection and execution store, before EnsureConsumers and the
// first StartShardWorker.
func (c *Ingest) Attach(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, execs execstore.Store) {
	c.ctx, c.nc, c.js, c.execs = ctx, nc, js, execs
}

// reject counts a report not applied, for reason.
func (c *Ingest) reject(reason string) {
	c.m.ReportsRejected.WithLabelValues(reason).Inc()
	c.m.Rejected.Add(1)
}

// apply counts a report step applied.
func (c *Ingest) apply() {
	c.m.ReportsApplied.Inc()
	c.m.Applied.Add(1)
}
