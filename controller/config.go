package controller

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// Defaults of Config.
const (
	// DefaultNode is the node name written into job ids.
	DefaultNode = "ctl"
	// DefaultHeartbeatInterval is how often agents are told to heartbeat.
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultNATSHost is the embedded server's listen host (loopback).
	DefaultNATSHost = "127.0.0.1"
	// DefaultNATSPort is the embedded server's client port.
	DefaultNATSPort = 4222
	// DefaultAckWait is how long a report may stay unacknowledged before the
	// server redelivers it (a controller that died mid-report).
	DefaultAckWait = 30 * time.Second
	// DefaultLeaseTTL is how long a shard lease (held by a controller
	// replica) and a group-job lease (held by an agent) live without renewal.
	DefaultLeaseTTL = 15 * time.Second
)

// Config configures a Controller. Start from DefaultConfig.
type Config struct {
	// Node is the node name used in job ids (protocol.ValidateName); default "ctl".
	Node string
	// DataDir is the embedded NATS JetStream store directory; required when
	// NATS.URL is empty.
	DataDir string
	// NATS says which NATS server to use.
	NATS NATSConfig
	// Shards is the number of report shards (default protocol.DefaultShards).
	// It is fixed once the report consumers exist: Start refuses a different value.
	Shards int
	// HeartbeatInterval is told to agents at registration; default 5s.
	HeartbeatInterval time.Duration
	// AgentOfflineAfter is how long after its last heartbeat an agent counts
	// as offline; default 3×HeartbeatInterval.
	AgentOfflineAfter time.Duration
	// LeaseTTL is the TTL of shard leases and group-job leases (the bucket
	// TTL of ax_leases); default 15s. A dead replica's shards and a dead
	// agent's group jobs move after it. At least 2×HeartbeatInterval: agents
	// renew their leases with heartbeats.
	LeaseTTL time.Duration
	// LeaseRenewInterval is how often a replica renews its shard leases and
	// its presence; default LeaseTTL/3, at most LeaseTTL/2.
	LeaseRenewInterval time.Duration
	// AckWait is how long a report may stay unacknowledged before the server
	// redelivers it (to another replica when its shard moved); default 30s.
	AckWait time.Duration
	// Reports bounds the report stream AX_RPT.
	Reports ReportsConfig
	// History says how long ended executions and retired jobs are kept.
	History HistoryConfig
	// Forward says how a replica hands a job change to the replica that
	// works the job's shard (forward.*).
	Forward ForwardConfig
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the controller's metrics; nil makes a new one (see Controller.Registry).
	Registry *prometheus.Registry
	// Clock is the time source; nil means clock.Real{}.
	Clock clock.Clock

	// monoNow overrides the time lease durations are measured with (tests
	// that step Clock's wall time while leases run on real time).
	monoNow func() time.Time
	// marksMargin is how much older than the oldest write mark a tracked
	// record must be for a reload to skip checking it (writemarks.go):
	// room for a step of the wall clock between an op's begin and its
	// record's updated_at. Default marksMargin; tests set a tiny one.
	marksMargin time.Duration
	// cmdPruneEvery is how often applied commands are removed from
	// AX_CMD, cmdPruneLag how far before the oldest write mark the
	// commands removed were stored (cmdprune.go). Defaults
	// cmdPruneInterval and sentRunsSkew; tests shorten both.
	cmdPruneEvery, cmdPruneLag time.Duration
	// reloadSkew is how much earlier than the oldest write mark a reload
	// that leans on the history index reads every record written, and how
	// far ahead it reads the PENDING ones due (reloadindex.go). Default
	// sentRunsSkew; tests shorten it, so that records they wrote a moment
	// ago are left to the index. reloadScanOnly makes every reload scan
	// ax_execs (tests that compare the two).
	reloadSkew     time.Duration
	reloadScanOnly bool
	// historyHold is how long the history follower holds a live snapshot.
	// Default historyHold; tests that must not see a held snapshot written
	// because the test ran long set an hour.
	historyHold time.Duration
	// historyIdleRelease overrides the window over which the history
	// follower decides to free the index writer's page cache
	// (historyIdleRelease; tests shorten it).
	historyIdleRelease time.Duration
	// historyReadWait and eventAckWait bound what an API caller waits for
	// the history index and for its change's events. Defaults
	// historyReadWait and eventAckWait; tests on a loaded machine (-race,
	// packages in parallel) wait longer, so that a list made after a write
	// sees it.
	historyReadWait time.Duration
	eventAckWait    time.Duration
	// heldTick is how often held PENDING events are looked at (one is
	// published two ticks after its create). Default heldTick; a test
	// that must see one dropped sets seconds.
	heldTick time.Duration
	// reportSweep overrides how often AX_RPT is looked at (ingest.Config.ReportSweep).
	reportSweep time.Duration
	// storeLossResendEvery overrides how often one agent's runs may be
	// sent again after store losses (resendgate.go; 0: the default,
	// below 0: at once).
	storeLossResendEvery time.Duration
	// unboundedAgentRates lifts the per-agent rates of registrations and
	// heartbeats (fleet.Config.UnboundedAgentRates): the package's tests
	// send one test agent's requests back to back.
	unboundedAgentRates bool
	// marksSweep overrides how often the marks of ended processes are
	// looked for (writemarks.go).
	marksSweep time.Duration
	// historySweep overrides how often the retention sweeper runs
	// (retention.Config.Sweep).
	historySweep time.Duration
	// historySweepBatch overrides the executions a sweep reads at once
	// (retention.Config.Batch; tests: a backlog of many batches without
	// thousands of executions).
	historySweepBatch int
	// historySweepBudget overrides how long a sweep takes batches of
	// executions (retention.Config.Budget; tests: a pass cut after its
	// first batch).
	historySweepBudget time.Duration
}

// HistoryConfig is history.*: the execution history (history.go,
// controller/retention). A terminal execution leaves live state (ax_execs) after
// a grace period equal to reports.dedup_window (ReportsConfig.DedupWindow,
// default 10m), and a one-shot job whose executions all did
// leaves the live job set; both stay in every replica's history index for
// Retention after they left live state, then go.
type HistoryConfig struct {
	// Retention is history.retention, default 7 days, between 1 minute and
	// AX_EVT's max age (7 days): the index is rebuilt from that stream.
	Retention time.Duration
}

// ForwardConfig is forward.*: how a replica that stored a job change
// hands it to the replica working the job's shard, which sends the
// agents' commands (controller/driver).
type ForwardConfig struct {
	// Timeout is forward.timeout: how long the API call waits for the
	// owner's answer before this replica sends the commands itself;
	// default 5s, between 100ms and 1m. An owner answers in milliseconds;
	// one cut off without its connection closing holds one call this long.
	Timeout time.Duration
	// Hold is forward.hold: how long, after an owner did not answer within
	// Timeout, changes of its shards are sent here without asking it
	// (until its leases lapse, lease_ttl, and its shards move); default
	// 30s, between 1s and 1h.
	Hold time.Duration
}

// Bounds of forward.timeout and forward.hold (ForwardConfig).
const (
	MinForwardTimeout = 100 * time.Millisecond
	MaxForwardTimeout = time.Minute
	MinForwardHold    = time.Second
	MaxForwardHold    = time.Hour
)

// DefaultHistoryRetention is the default of history.retention.
const DefaultHistoryRetention = 7 * 24 * time.Hour

// NATSConfig says which NATS server the controller uses.
type NATSConfig struct {
	// URL names an external server or cluster; empty runs an embedded server.
	URL string
	// Host is the embedded server's listen host, default "127.0.0.1". Without
	// auth (Auth "none") it must be a loopback address.
	Host string
	// Port is the embedded server's client port, default 4222; -1 picks a random port.
	Port int
	// CredsFile is the client credentials file for an external server.
	CredsFile string
	// Replicas is the replica count of streams and buckets (default 1).
	Replicas int
	// Auth is the embedded server's authentication: "none" (default,
	// loopback only) or "nkeys" (the controller and every enrolled agent
	// get their own NKey user; see package controller/auth).
	Auth string
	// TLS is nats.tls: the embedded server serves TLS with it, or, with
	// URL, the connection to the external server uses it (see TLSConfig).
	TLS TLSConfig
}

// ReportsConfig bounds AX_RPT, the reports agents sent that no controller
// has applied yet (they pile up while no replica consumes, e.g. during an
// outage). When the stream is full a new report is refused: the agent
// keeps it in its outbox and sends it again later, so nothing accepted is
// dropped for room. A report older than MaxAge is removed by the stream;
// the alert AxReportsNotApplied fires long before (configs/prometheus).
// Every replica writes its values to the stream at start (the last one
// started wins): use the same values on every replica.
type ReportsConfig struct {
	// MaxBytes is reports.max_bytes, default 1 GiB, at least 1 MiB.
	MaxBytes int64
	// MaxAge is reports.max_age, default 7 days, at least 1h.
	MaxAge time.Duration
	// MaxPerSubject is reports.max_per_subject: how many reports AX_RPT
	// holds at most of one agent and shard (its subject
	// ax.rpt.<shard>.<agent>). 0 (the default) derives it from MaxBytes and
	// the shard count (streams.DefaultReportMaxPerSubject: 256 for 1 GiB and
	// 16 shards); at least streams.MinReportMaxPerSubject. It is what an
	// enrolled agent flooding reports can fill: its own subjects, not the
	// stream.
	MaxPerSubject int64
	// DedupWindow is reports.dedup_window, default DefaultDedupWindow (10m),
	// between 1m and 24h and at most MaxAge: the Msg-Id de-duplication
	// window (Duplicates) of AX_RPT, the cap of AX_EVT's
	// (controllerDedupWindow), and the live grace
	// (see DefaultDedupWindow).
	DedupWindow time.Duration
}

// DefaultDedupWindow is the default of reports.dedup_window. The window is
// also the live grace: how long a terminal execution stays in live state
// (ax_execs) after its last change before it leaves it for the history
// alone. The grace equals the window (use the same value on every
// replica: the last one started sets the streams), so a report that
// AX_RPT no longer drops as a duplicate finds the execution either live
// (the state machine refuses the step it already made) or in history
// (refused there, never applied to a new record).
//
// Why 10 minutes: neither bound is what keeps a report from being applied
// twice (the live record and the history are), so both are costs. The
// window holds every report Msg-Id within it in the embedded server's
// memory (about 240 bytes each, rebuilt by reading those messages at each
// start), and the grace keeps every ended execution, and its one-shot job,
// in ax_execs, ax_jobs, the job cache and the server's subject indexes.
// Both grow with the execution rate times the window: at 500 executions a
// second, 300,000 executions for 10 minutes, 3.6 million for 2 hours (the
// default before). What a longer window buys: a copy an agent sends again
// after a longer link cut is dropped by the stream instead of stored and
// refused, an operator can `exec retry` a FAILED execution for longer
// (after the grace it is final), and an ended one-shot job holds its
// idempotency key longer (it is released when the job leaves live state).
const DefaultDedupWindow = streams.DefaultDuplicates

// Bounds of reports.dedup_window.
const (
	MinDedupWindow = time.Minute
	MaxDedupWindow = 24 * time.Hour
)

// DefaultConfig returns a config with every default filled in except DataDir.
func DefaultConfig() Config {
	return Config{
		Node:               DefaultNode,
		NATS:               NATSConfig{Host: DefaultNATSHost, Port: DefaultNATSPort, Replicas: 1},
		Shards:             protocol.DefaultShards,
		HeartbeatInterval:  DefaultHeartbeatInterval,
		AgentOfflineAfter:  3 * DefaultHeartbeatInterval,
		LeaseTTL:           DefaultLeaseTTL,
		LeaseRenewInterval: DefaultLeaseTTL / 3,
		AckWait:            DefaultAckWait,
		Reports:            ReportsConfig{MaxBytes: streams.DefaultReportMaxBytes, MaxAge: streams.DefaultReportMaxAge, DedupWindow: DefaultDedupWindow},
		History:            HistoryConfig{Retention: DefaultHistoryRetention},
		Forward:            ForwardConfig{Timeout: driver.DefaultTimeout, Hold: driver.DefaultHold},
	}
}

// withDefaults fills zero values with their defaults.
func (c Config) withDefaults() Config {
	if c.Node == "" {
		c.Node = DefaultNode
	}
	if c.marksMargin <= 0 {
		c.marksMargin = marksMargin
	}
	if c.historyHold <= 0 {
		c.historyHold = historyHold
	}
	if c.cmdPruneEvery <= 0 {
		c.cmdPruneEvery = cmdPruneInterval
	}
	if c.cmdPruneLag <= 0 {
		c.cmdPruneLag = sentRunsSkew
	}
	if c.reloadSkew <= 0 {
		c.reloadSkew = sentRunsSkew
	}
	if c.historyIdleRelease <= 0 {
		c.historyIdleRelease = historyIdleRelease
	}
	if c.historyReadWait <= 0 {
		c.historyReadWait = historyReadWait
	}
	if c.storeLossResendEvery == 0 {
		c.storeLossResendEvery = storeLossResendEvery
	}
	if c.eventAckWait <= 0 {
		c.eventAckWait = eventAckWait
	}
	if c.heldTick <= 0 {
		c.heldTick = heldTick
	}
	if c.NATS.Host == "" {
		c.NATS.Host = DefaultNATSHost
	}
	if c.NATS.Port == 0 {
		c.NATS.Port = DefaultNATSPort
	}
	if c.NATS.Replicas == 0 {
		c.NATS.Replicas = 1
	}
	if c.NATS.Auth == "" {
		c.NATS.Auth = auth.ModeNone
	}
	if c.Shards == 0 {
		c.Shards = protocol.DefaultShards
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.AgentOfflineAfter == 0 {
		c.AgentOfflineAfter = 3 * c.HeartbeatInterval
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = c.LeaseTTL / 3
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.Reports.MaxBytes == 0 {
		c.Reports.MaxBytes = streams.DefaultReportMaxBytes
	}
	if c.Reports.MaxAge == 0 {
		c.Reports.MaxAge = streams.DefaultReportMaxAge
	}
	if c.Reports.DedupWindow == 0 {
		c.Reports.DedupWindow = DefaultDedupWindow
	}
	if c.History.Retention == 0 {
		c.History.Retention = DefaultHistoryRetention
	}
	if c.Forward.Timeout == 0 {
		c.Forward.Timeout = driver.DefaultTimeout
	}
	if c.Forward.Hold == 0 {
		c.Forward.Hold = driver.DefaultHold
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// liveGrace is how long a terminal execution stays in live state after its
// last change: reports.dedup_window, the Msg-Id de-duplication window the
// controller sets on AX_RPT. Never shorter than that window: a replayed
// report the stream no longer drops finds the execution live (the state
// machine refuses a step it made) or in history (inHistory refuses it).
func (c *core) liveGrace() time.Duration { return c.cfg.Reports.DedupWindow }

// controllerDedupWindow is the Msg-Id de-duplication window of AX_EVT,
// a stream only controllers publish to: twice ack_wait, at least
// streams.DefaultControllerDuplicates (2m); streams.Config caps it at
// Duplicates, reports.dedup_window.
//
// A controller publishes an event again (same Msg-Id) when a publish is
// retried, when a redelivered report repeats steps already applied (after
// ack_wait, to the shard's next owner when a replica died), and when a
// reload restores an event the history index lacks (it waits until the
// index holds every stored event first, so a stored one is not sent
// again). The window covers the first two; a report redelivered later
// than it (a controller killed between storing an event and acknowledging
// its report, and down longer than the window) stores its event a second
// time, which the history index ignores (it keeps an execution's newest
// snapshot) and a plain subscriber sees twice. A create's PENDING event
// has none of these second publishers and carries no Msg-Id
// (publishEvent).
//
// AX_CMD keeps the server's least window (streams.CommandDuplicates). A
// run command is published again when a PENDING execution is created
// again (execution.SendRun with Resend), when a takeover re-sends the
// runs of RETRY_WAITING executions, and when a reload finds a placed
// PENDING record whose command AX_CMD does not hold (sentruns.go: it
// reads the commands before it sends one). A command stored twice
// reaches its agent twice, and the agent stores an attempt of an
// execution once (its SQLite key is exec_id and attempt), an assignment
// by generation, a lease epoch never backwards: a window protects nothing.
//
// The server holds every Msg-Id within a window in memory (about 240
// bytes in a heap profile of the soak) and reads them all back at every
// start: at 500 executions a second (about four events each) a 2h window
// would hold about 14 million of them, over 3 GiB, and 300,000 delayed
// one-shots held their 300,000 run commands' Msg-Ids for 2h (48 MB of
// heap after a restart, and a read of every command at the start).
func (c *core) controllerDedupWindow() time.Duration {
	return max(2*c.cfg.AckWait, streams.DefaultControllerDuplicates)
}
