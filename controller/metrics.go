package controller

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

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
	metricReportsDeferred = "ax_reports_deferred_total"
)

// Reasons of ax_reports_rejected_total.
const (
	rejectInvalid     = "invalid"      // undecodable or invalid message
	rejectDuplicate   = "duplicate"    // (exec_id, attempt, kind) already applied
	rejectOldAttempt  = "old_attempt"  // attempt older than the execution's
	rejectOldEpoch    = "old_epoch"    // lease epoch older than the execution's
	rejectTerminal    = "terminal"     // execution already terminal
	rejectUnknownExec = "unknown_exec" // no record and the kind cannot create one
	rejectFuture      = "future_attempt"
	rejectTransition  = "transition"  // the state machine refuses the change
	rejectWrongAgent  = "wrong_agent" // sent on another agent's subject, or for another agent's attempt
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
	deferred        prometheus.Counter

	// applied mirrors reportsApplied for tests and benchmarks.
	applied  atomic.Int64
	rejected atomic.Int64
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	buckets := []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}
	m := &metrics{
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
			Help: "Agent reports not applied, by reason (invalid, duplicate, old_attempt, old_epoch, terminal, unknown_exec, future_attempt, transition)."},
			[]string{"reason"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{Name: metricReportsDeferred,
			Help: "Reports redelivered later because an earlier report of the same execution had not arrived yet."}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricCommands,
			Help: "Commands published to agents, by kind."}, []string{"kind"}),
	}
	for _, s := range protocol.States {
		m.executions.WithLabelValues(string(s))
	}
	for _, c := range []prometheus.Collector{m.executions, m.scheduleLag, m.duration, m.retriesPending,
		m.agentsOnline, m.reportsApplied, m.reportsRejected, m.commands, m.deferred} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) reject(reason string) {
	m.reportsRejected.WithLabelValues(reason).Inc()
	m.rejected.Add(1)
}

func (m *metrics) apply() {
	m.reportsApplied.Inc()
	m.applied.Add(1)
}
