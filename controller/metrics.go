package controller

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/pkg/protocol"
)

// Metric names (stable; listed in doc.go).
const (
	metricExecutions      = "ax_executions_total"
	metricScheduleLag     = "ax_schedule_lag_seconds"
	metricDuration        = "ax_execution_duration_seconds"
	metricRetriesPending  = "ax_retries_pending"
	metricAgentsOnline    = "ax_agents_online"
	metricReportsApplied  = "ax_reports_applied_total"
	metricReportsRejected = "ax_reports_rejected_total"
	metricCommands        = "ax_commands_total"
	metricJobChanges      = "ax_job_changes_total"
	metricReportsDeferred = "ax_reports_deferred_total"
	metricStrayUnassigns  = "ax_stray_unassigns_total"
	metricAgentsKnown     = "ax_agents_known"
	metricAgentsNoCmd     = "ax_agents_without_command_consumer"
	metricAgentOutbox     = "ax_agent_outbox_depth"
	metricAgentQueue      = "ax_agent_queue_depth"
	metricAgentRunning    = "ax_agent_running"
	metricShardsOwned     = "ax_shards_owned"
	metricLeaseGrants     = "ax_lease_grants_total"
	metricLeaseExpiries   = "ax_lease_expiries_total"
	metricLeaseTakeovers  = "ax_lease_takeovers_total"
	metricFailover        = "ax_lease_failover_seconds"
	metricLabelsIgnored   = "ax_agent_labels_ignored_total"
	metricStoreResets     = "ax_agent_store_resets_total"
	metricRptBytes        = "ax_report_stream_bytes"
	metricRptMaxBytes     = "ax_report_stream_max_bytes"
	metricRptMsgs         = "ax_report_stream_messages"
	metricRptOldest       = "ax_report_stream_oldest_seconds"
	metricMarksOpen       = "ax_write_ops_open"
	metricMarksFailed     = "ax_write_ops_failed"
	metricRptMaxAge       = "ax_report_stream_max_age_seconds"
	metricRptAckedRemoved = "ax_report_stream_acked_removed_total"
	metricAgentRefused    = "ax_agent_requests_refused_total"
	metricRptRemade       = "ax_report_consumers_remade_total"
	metricRptReset        = "ax_report_consumers_reset_total"
	metricCmdBytes        = "ax_command_stream_bytes"
	metricCmdMsgs         = "ax_command_stream_messages"
	metricCmdPrunes       = "ax_command_prunes_total"
	metricRetRemoved      = "ax_retention_removed_total"
	metricRetPasses       = "ax_retention_passes_total"
)

type metrics struct {
	executions      *prometheus.CounterVec
	scheduleLag     prometheus.Histogram
	duration        prometheus.Histogram
	retriesPending  prometheus.Gauge
	agentsOnline    prometheus.Gauge
	reportsApplied  prometheus.Counter
	reportsRejected *prometheus.CounterVec
	commands        *prometheus.CounterVec
	jobChanges      *prometheus.CounterVec
	deferred        prometheus.Counter
	strayUnassigns  prometheus.Counter
	agentsKnown     prometheus.Gauge
	agentsNoCmd     prometheus.Gauge
	// Per-agent stats of the last heartbeat, labelled by agent; the
	// children of an agent are deleted when it is revoked.
	agentOutbox  *prometheus.GaugeVec
	agentQueue   *prometheus.GaugeVec
	agentRunning *prometheus.GaugeVec
	gaugeMu      sync.Mutex
	gauges       map[string]*agentGaugeSet // by agent (agentStats)
	// Leases: shards this replica works, group-lease grants and expiries,
	// takeovers (kind shard or group) and the time a lapsed group lease
	// went unrenewed before it moved.
	shardsOwned   prometheus.Gauge
	leaseGrants   prometheus.Counter
	leaseExpiries prometheus.Counter
	takeovers     *prometheus.CounterVec
	failover      prometheus.Histogram
	// labelsIgnored counts registrations whose labels differed from the
	// controller's; storeResets registrations of agents whose store lost
	// its state (resumed after the commands already sent).
	labelsIgnored prometheus.Counter
	storeResets   prometheus.Counter
	// AX_RPT as of the last look (ingest/reportstream.go): bytes and reports
	// held, the age of the oldest, and the stream's bounds.
	rptBytes, rptMaxBytes, rptMsgs, rptOldest, rptMaxAge prometheus.Gauge
	// Write marks (writemarks.go) as last stored: ops open, and those
	// failed (an effect not stored), which hold the mark back.
	marksOpen, marksFailed prometheus.Gauge
	// Reports removed from AX_RPT at or below their consumer's ack floor
	// (applied and acknowledged, left stored by a kill of the server).
	rptAckedRemoved prometheus.Counter
	// Report consumers a shard worker made again after they were gone.
	rptRemade prometheus.Counter
	// Report consumers a shard worker reset as it started, because an
	// earlier reader left reports unacknowledged.
	rptReset prometheus.Counter
	// AX_CMD as of the pruner's last pass (cmdprune.go), and the removals
	// of an agent's applied commands it made.
	cmdBytes, cmdMsgs prometheus.Gauge
	cmdPrunes         prometheus.Counter
	// Agent requests not served: registrations, heartbeats and consumer
	// gateway requests dropped for their reply subject, gateway requests
	// refused (gateway.go).
	agentRefused *prometheus.CounterVec
	// The retention sweeper's removals by kind and passes by how they
	// ended (controller/retention).
	retRemoved, retPasses *prometheus.CounterVec

	// applied mirrors reportsApplied for tests and benchmarks.
	applied  atomic.Int64
	rejected atomic.Int64
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	buckets := []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}
	m := &metrics{
		gauges: map[string]*agentGaugeSet{},
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricExecutions,
			Help: "Execution transitions into each state."}, []string{"state"}),
		scheduleLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricScheduleLag,
			Help: "How late attempts started after their scheduled time (from running reports).", Buckets: buckets}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricDuration,
			Help: "Run time of finished attempts.", Buckets: buckets}),
		retriesPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRetriesPending,
			Help: "Executions in RETRY_WAITING whose next attempt is on this controller's retry wheel."}),
		agentsOnline: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricAgentsOnline,
			Help: "Agents whose last heartbeat is within agent_offline_after."}),
		reportsApplied: prometheus.NewCounter(prometheus.CounterOpts{Name: metricReportsApplied,
			Help: "Agent report steps applied to the execution state machine (a report standing for earlier steps counts each)."}),
		reportsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricReportsRejected,
			Help: "Agent reports not applied, by reason (invalid, duplicate, old_attempt, old_epoch, terminal, unknown_exec, future_attempt, transition, wrong_agent, unknown_job, not_assigned, bad_shard)."},
			[]string{"reason"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{Name: metricReportsDeferred,
			Help: "Reports redelivered later because an earlier report of the same execution had not arrived yet."}),
		strayUnassigns: prometheus.NewCounter(prometheus.CounterOpts{Name: metricStrayUnassigns,
			Help: "Unassign commands sent to agents that fired a job they must not hold (deleted, pinned elsewhere, one-shot)."}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricCommands,
			Help: "Commands published to agents, by kind."}, []string{"kind"}),
		jobChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricJobChanges,
			Help: "Stored job changes whose commands were sent, by route (local, forwarded, fallback, served: controller/driver)."}, []string{"route"}),
		agentsKnown: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricAgentsKnown,
			Help: "Registered agents, online or not (revoked agents excluded)."}),
		agentsNoCmd: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricAgentsNoCmd,
			Help: "Online agents without a command consumer on AX_CMD in two consecutive checks: they receive no commands (AX_CMD's consumer limit reached?)."}),
		agentOutbox: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricAgentOutbox,
			Help: "Reports waiting in the agent's outbox for the controller, as of its last heartbeat."}, []string{"agent"}),
		agentQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricAgentQueue,
			Help: "Triggered executions waiting for a worker on the agent, as of its last heartbeat."}, []string{"agent"}),
		agentRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricAgentRunning,
			Help: "Attempts running on the agent, as of its last heartbeat."}, []string{"agent"}),
		shardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricShardsOwned,
			Help: "Report shards whose lease this controller replica holds."}),
		leaseGrants: prometheus.NewCounter(prometheus.CounterOpts{Name: metricLeaseGrants,
			Help: "Group-job leases granted by this replica (first grants and moves)."}),
		leaseExpiries: prometheus.NewCounter(prometheus.CounterOpts{Name: metricLeaseExpiries,
			Help: "Group-job leases that lapsed (not renewed for lease_ttl) and were granted again."}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricLeaseTakeovers,
			Help: "Leases taken from another holder: kind=group (a job moved to another agent), kind=shard (a shard taken from another replica)."},
			[]string{"kind"}),
		failover: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricFailover,
			Help:    "Time from the last renewal of a lapsed group lease to its grant to another agent.",
			Buckets: []float64{.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}}),
		labelsIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: metricLabelsIgnored,
			Help: "Registrations whose labels differed from the controller's (set at enrollment or by an operator) and were ignored."}),
		storeResets: prometheus.NewCounter(prometheus.CounterOpts{Name: metricStoreResets,
			Help: "Registrations of agents whose store had lost its state: resumed after the commands already sent, their assignments and pending runs sent again."}),
		rptBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRptBytes,
			Help: "Bytes of reports in AX_RPT not applied yet (agents' reports wait there for a controller)."}),
		rptMaxBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRptMaxBytes,
			Help: "AX_RPT's byte bound (reports.max_bytes): past it new reports are refused and agents keep them in their outbox."}),
		rptMsgs: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRptMsgs,
			Help: "Reports in AX_RPT not applied yet."}),
		rptOldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRptOldest,
			Help: "Age of the oldest report in AX_RPT (0 when empty)."}),
		rptMaxAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricRptMaxAge,
			Help: "AX_RPT's age bound (reports.max_age): an older report is removed by the stream."}),
		marksOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricMarksOpen,
			Help: "Changes to executions this replica made on its own whose command and events are not all stored yet (as of the last stored write mark)."}),
		marksFailed: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricMarksFailed,
			Help: "Of those, changes with an effect that failed to be stored: they hold the write mark back until the process restarts, and a reload checks every record since."}),
		rptAckedRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: metricRptAckedRemoved,
			Help: "Reports removed from AX_RPT at or below their consumer's ack floor: applied and acknowledged, but left stored (a kill -9 of the server lost their removal)."}),
		rptRemade: prometheus.NewCounter(prometheus.CounterOpts{Name: metricRptRemade,
			Help: "Report consumers on AX_RPT a shard worker made again because they were gone (deleted, or lost by the NATS cluster); their unacknowledged reports were delivered again."}),
		rptReset: prometheus.NewCounter(prometheus.CounterOpts{Name: metricRptReset,
			Help: "Report consumers on AX_RPT a shard worker deleted and made again as it started, because an earlier reader (a dead or frozen replica, this process before a kill) left reports delivered and unacknowledged; the new consumer delivered them again at once, in stream order."}),
		cmdBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricCmdBytes,
			Help: "Bytes of commands in AX_CMD, as of the last pass of the removal of applied commands (every minute)."}),
		cmdMsgs: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricCmdMsgs,
			Help: "Commands in AX_CMD, as of the last pass of the removal of applied commands."}),
		cmdPrunes: prometheus.NewCounter(prometheus.CounterOpts{Name: metricCmdPrunes,
			Help: "Removals from AX_CMD of the commands an agent applied (up to the cursor it reported, keeping its last command), made by this replica."}),
		agentRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricAgentRefused,
			Help: "Agent requests not served, by endpoint (register, heartbeat, consumer_gateway) and reason: reply (dropped: the reply subject is not the agent's inbox), subject (dropped), consumer (a consumer beyond the agent's own pull consumer, refused)."},
			[]string{"endpoint", "reason"}),
		retRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricRetRemoved,
			Help: "What this replica's retention sweeper moved out of live state into history, by kind: execution (from ax_execs), job (one-shot jobs from ax_jobs)."},
			[]string{"kind"}),
		retPasses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricRetPasses,
			Help: "Passes of this replica's retention sweeper, by how they ended: done (took every execution past the grace), budget (cut after 45 s with some left, followed by another at once; passes ending so one after the other mean the sweeper is behind the load and live state grows)."},
			[]string{"ended"}),
	}
	m.takeovers.WithLabelValues("group")
	m.takeovers.WithLabelValues("shard")
	for _, s := range protocol.States {
		m.executions.WithLabelValues(string(s))
	}
	m.retRemoved.WithLabelValues(retention.KindExecution)
	m.retRemoved.WithLabelValues(retention.KindJob)
	m.retPasses.WithLabelValues(retention.EndedDone)
	m.retPasses.WithLabelValues(retention.EndedBudget)
	for _, c := range []prometheus.Collector{m.executions, m.scheduleLag, m.duration, m.retriesPending,
		m.agentsOnline, m.reportsApplied, m.reportsRejected, m.commands, m.jobChanges, m.deferred, m.strayUnassigns,
		m.agentsKnown, m.agentsNoCmd, m.agentOutbox, m.agentQueue, m.agentRunning,
		m.shardsOwned, m.leaseGrants, m.leaseExpiries, m.takeovers, m.failover, m.labelsIgnored, m.storeResets,
		m.rptBytes, m.rptMaxBytes, m.rptMsgs, m.rptOldest, m.rptMaxAge, m.rptAckedRemoved, m.rptRemade, m.rptReset, m.agentRefused,
		m.marksOpen, m.marksFailed, m.cmdBytes, m.cmdMsgs, m.cmdPrunes, m.retRemoved, m.retPasses} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// agentGaugeSet is an agent's per-agent gauges and the values they hold.
type agentGaugeSet struct {
	outbox, queue, running prometheus.Gauge
	outboxN, queueN, runN  int
}

// agentStats sets the per-agent gauges from an agent's heartbeat stats.
// The gauges of each agent are looked up once and kept (a heartbeat, 2,000
// a second at 10,000 agents, looked up three labelled children), and set
// only when a value changed.
func (m *metrics) agentStats(agent string, s protocol.Stats) {
	m.gaugeMu.Lock()
	defer m.gaugeMu.Unlock()
	g := m.gauges[agent]
	if g == nil {
		g = &agentGaugeSet{outbox: m.agentOutbox.WithLabelValues(agent), queue: m.agentQueue.WithLabelValues(agent),
			running: m.agentRunning.WithLabelValues(agent), outboxN: -1, queueN: -1, runN: -1}
		m.gauges[agent] = g
	}
	if g.outboxN != s.OutboxDepth {
		g.outbox.Set(float64(s.OutboxDepth))
		g.outboxN = s.OutboxDepth
	}
	if g.queueN != s.QueueDepth {
		g.queue.Set(float64(s.QueueDepth))
		g.queueN = s.QueueDepth
	}
	if g.runN != s.Running {
		g.running.Set(float64(s.Running))
		g.runN = s.Running
	}
}

// forgetAgent deletes the per-agent gauges of agent.
func (m *metrics) forgetAgent(agent string) {
	m.gaugeMu.Lock()
	defer m.gaugeMu.Unlock()
	delete(m.gauges, agent)
	m.agentOutbox.DeleteLabelValues(agent)
	m.agentQueue.DeleteLabelValues(agent)
	m.agentRunning.DeleteLabelValues(agent)
}
