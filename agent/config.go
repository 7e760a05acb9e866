package agent

import (
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// Defaults of Config.
const (
	DefaultNATSURL           = "nats://127.0.0.1:4222"
	DefaultDataDir           = "/var/lib/ax-agent"
	DefaultPingInterval      = 2 * time.Second
	DefaultMaxPingsOut       = 2
	DefaultReconnectWait     = 500 * time.Millisecond
	DefaultRequestTimeout    = 3 * time.Second
	DefaultHeartbeat         = 5 * time.Second
	DefaultQueueSize         = 1024
	DefaultAgingStep         = 500 * time.Millisecond
	DefaultRetention         = 24 * time.Hour
	DefaultMaxSkew           = 2 * time.Second
	DefaultOnSkew            = SkewRefuse
	DefaultJumpThreshold     = time.Second
	DefaultOutboxWindow      = 256
	DefaultShutdownGrace     = 10 * time.Second
	DefaultLogFormat         = "json"
	DefaultLogLevel          = "info"
	DefaultStoreSynchronous  = store.SyncFull
	DefaultStoreMaxBatch     = store.DefaultMaxBatch
	DefaultSlowStartFraction = 2 // workers / 2 during catch-up
	DefaultMemoryLimitMiB    = 20
	DefaultPruneInterval     = 10 * time.Minute
	DefaultReleasePagesAfter = time.Minute
)

// Skew policies.
const (
	// SkewRefuse: over clock.max_skew the agent does not fire.
	SkewRefuse = "refuse"
	// SkewAdopt: over clock.max_skew the agent fires on controller time.
	SkewAdopt = "adopt"
)

// Config is the agent's configuration. Keys (YAML, AX_* env) are the
// config tags, e.g. clock.max_skew / AX_CLOCK_MAX_SKEW.
type Config struct {
	// ID is the agent id (subject-safe name).
	ID string `config:"id"`
	// Labels select the agent for group jobs when the controller has none
	// for it yet (first registration without enrollment); the controller's
	// labels count (set at enrollment or by ax-controller agent label).
	Labels map[string]string `config:"labels"`
	// DataDir holds agent.db.
	DataDir string `config:"data_dir"`
	// Workers is the handler pool size (default 2×CPU). While handlers
	// are short, more attempts are marked RUNNING ahead of a free worker,
	// up to eight times Workers (agent/scheduler's prefetch), due runs
	// sent by the controller among them (its direct starts).
	Workers int `config:"workers"`
	// MemoryLimitMiB is the soft limit on the Go heap the ax-agent binary
	// sets (runtime/debug.SetMemoryLimit; GOMEMLIMIT wins); 0: none. The
	// agent library itself does not set it (it is process-wide).
	MemoryLimitMiB int `config:"memory_limit_mib"`
	// ReleasePagesAfter is how long after its start the ax-agent binary
	// gives back the pages of its own executable it has mapped read-only
	// (internal/binpages: code and read-only data that start-up touched
	// once), so that its resident set counts what it uses from then on;
	// 0: never. Linux only; the agent library itself does not do it (it is
	// process-wide).
	ReleasePagesAfter time.Duration `config:"release_pages_after"`

	NATS     NATSConfig     `config:"nats"`
	Queue    QueueConfig    `config:"queue"`
	Store    StoreConfig    `config:"store"`
	Clock    ClockConfig    `config:"clock"`
	Exec     ExecConfig     `config:"exec"`
	HTTP     HTTPConfig     `config:"http"`
	Outbox   OutboxConfig   `config:"outbox"`
	Shutdown ShutdownConfig `config:"shutdown"`
	Log      LogConfig      `config:"log"`
}

// NATSConfig says how to reach the controller.
type NATSConfig struct {
	URL string `config:"url"`
	// Creds is a NATS credentials file or an NKey seed file written by
	// `ax-controller agent enroll` (secret: masked when printed).
	Creds string `config:"creds"`
	// Token is a NATS auth token (secret: masked when printed).
	Token string `config:"token"`
	// PingInterval is how often the connection is pinged; in a NATS
	// cluster it is also the idle heartbeat of the command pulls, within
	// 1s..10s (10s on a lone server, commandHeartbeat).
	PingInterval   time.Duration `config:"ping_interval"`
	MaxPingsOut    int           `config:"max_pings_out"`
	ReconnectWait  time.Duration `config:"reconnect_wait"`
	RequestTimeout time.Duration `config:"request_timeout"`
	// Heartbeat is used until the controller names its interval.
	Heartbeat time.Duration `config:"heartbeat"`
	// ReportCursor sends the command cursor the store holds with every
	// heartbeat (protocol.Heartbeat.Cursor), so that the controller
	// removes the commands this agent applied from AX_CMD instead of
	// keeping them for the stream's seven days. Controllers built before
	// 2026-12-06 refuse such heartbeats: upgrade them first, or set it
	// false.
	ReportCursor bool `config:"report_cursor"`
	// TLS configures TLS to the NATS server (paths, not secrets: shown
	// when printed).
	TLS TLSConfig `config:"tls"`
}

// TLSConfig is nats.tls. Any key set makes the connection TLS.
type TLSConfig struct {
	// CAFile is a PEM bundle of the CA(s) that sign the server's
	// certificate; empty: the system roots.
	CAFile string `config:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key, for a
	// server that verifies clients (nats.tls.verify_clients); optional.
	CertFile string `config:"cert_file"`
	KeyFile  string `config:"key_file"`
}

// QueueConfig shapes the ready queue.
type QueueConfig struct {
	// Size bounds the executions held in memory; more wait in SQLite.
	Size int `config:"size"`
	// AgingStep: every step an execution waits raises its priority by one.
	AgingStep time.Duration `config:"aging_step"`
}

// StoreConfig tunes SQLite.
type StoreConfig struct {
	// Synchronous is "full" (default) or "normal".
	Synchronous string `config:"synchronous"`
	MaxBatch    int    `config:"max_batch"`
	// Retention keeps final executions this long.
	Retention time.Duration `config:"retention"`
	// PruneInterval is how often executions past Retention are deleted.
	PruneInterval time.Duration `config:"prune_interval"`
}

// ClockConfig bounds the clock skew to the controller.
type ClockConfig struct {
	MaxSkew time.Duration `config:"max_skew"`
	// OnSkew is "refuse" (default) or "adopt".
	OnSkew string `config:"on_skew"`
	// JumpThreshold: wall and monotonic elapsed time diverging by more
	// than this is a wall-clock jump (schedules are re-planned).
	JumpThreshold time.Duration `config:"jump_threshold"`
}

// ExecConfig is the exec handler's allowlist.
type ExecConfig struct {
	// Allow lists absolute command paths or globs that may run.
	Allow []string `config:"allow"`
	// EnvAllow lists the environment variable names a job's payload may
	// set (exact names; none by default). Names that load or run code
	// (LD_*, BASH_ENV, ENV, BASH_FUNC_*, PATH, PERL*, PYTHON*, IFS, ...;
	// handler.CheckEnvAllowName) are refused.
	EnvAllow           []string `config:"env_allow"`
	PermanentExitCodes []int    `config:"permanent_exit_codes"`
}

// HTTPConfig is the http handler's allowlist.
type HTTPConfig struct {
	// Allow lists the URLs that may be called: scheme, host and port
	// match exactly, the path by whole segments (handler.CheckAllowURL).
	Allow []string `config:"allow"`
}

// DefaultOutboxLinger is how long the flusher waits after new reports
// before publishing them, so that a fast attempt's triggered, running and
// finished reports go out as one (coalesced) message.
const DefaultOutboxLinger = 10 * time.Millisecond

// DefaultOutboxHold is how long the flusher holds back the triggered (or
// triggered and running) report of an attempt, for its later steps so
// that they go out as one report. A second covers the queue wait of
// attempts under a backlog, while a long handler still shows RUNNING
// within a second of its trigger. At 200 ms, the attempts of
// bench/vsasynq's dispatch workload that waited in the ready queue longer
// made 1.41–1.61 reports and 2.0–2.3 record writes per execution; at a
// second, 1 and 2 (the design's budget: one report, at most two record
// writes).
const DefaultOutboxHold = time.Second

// MaxOutboxHold bounds outbox.hold: under the default heartbeat interval,
// so that what the controller sees of an attempt lags it by less than what
// it sees of the agent's liveness.
const MaxOutboxHold = 2 * time.Second

// DefaultSkippedWindow is how long a job's run of fires skipped by
// overlap is counted before it is written as one SKIPPED row and report
// (outbox.coalesce_skipped). Real fires of the job in between hold the
// run in the job's row rather than write it, so a job that cannot keep up
// with its schedule (every: 1s, attempts queued for three seconds) makes
// one skipped record per window. At 1s (the window before 2026-12-04)
// bench/vsasynq's periodic workload at 3,000 jobs a second made 2.7
// skipped records per execution that ran; at 10s, written with each real
// fire, 0.8; held across real fires, 0.1 (bench/JOURNAL.md).
const DefaultSkippedWindow = 10 * time.Second

// MaxSkippedWindow bounds outbox.skipped_window.
const MaxSkippedWindow = 10 * time.Minute

// OutboxConfig tunes the report flusher.
type OutboxConfig struct {
	// Window is the number of outstanding async publishes.
	Window int `config:"window"`
	// Linger is how long new reports wait before they are published (0:
	// at once), at most a second. It delays only what the controller sees:
	// reports are durable before, and handlers do not wait for it.
	Linger time.Duration `config:"linger"`
	// Hold is how long the triggered or running report of an attempt (of
	// a run the controller sent or a fire of a periodic job, not under a
	// group job's lease) is held back, waiting for its next step so that
	// they go out as one report (0: not held), at most MaxOutboxHold. Only
	// the publish waits: the row is durable first. Finished, skipped and
	// other reports are never held (beyond the linger), and a held report
	// goes at once when the link comes back or the agent stops.
	Hold time.Duration `config:"hold"`
	// CoalesceSkipped records the fires of a job skipped by overlap as one
	// report with their count (Report.SkippedCount), written after
	// SkippedWindow (real fires in between hold them in the job's row),
	// and a misfire's skipped fires likewise, instead of one report per
	// fire. Controllers built before 2026-12-01 refuse such reports:
	// upgrade them first, or set it false.
	CoalesceSkipped bool `config:"coalesce_skipped"`
	// SkippedWindow is how long, at most, a job's skipped fires are
	// counted before their report is written (DefaultSkippedWindow),
	// between 1s and MaxSkippedWindow. Until written or held by a real
	// fire they are recorded nowhere; after a crash the restart's misfire
	// policy accounts for them.
	SkippedWindow time.Duration `config:"skipped_window"`
}

// ShutdownConfig tunes the shutdown.
type ShutdownConfig struct {
	// Grace is how long running handlers get after SIGTERM.
	Grace time.Duration `config:"grace"`
}

// LogConfig sets the log output.
type LogConfig struct {
	Format string `config:"format"` // json (default) or text
	Level  string `config:"level"`  // debug, info, warn, error
}

// DefaultConfig returns a config with every default set (ID empty).
func DefaultConfig() Config {
	return Config{
		DataDir:           DefaultDataDir,
		Workers:           2 * runtime.NumCPU(),
		MemoryLimitMiB:    DefaultMemoryLimitMiB,
		ReleasePagesAfter: DefaultReleasePagesAfter,
		NATS: NATSConfig{URL: DefaultNATSURL, PingInterval: DefaultPingInterval, MaxPingsOut: DefaultMaxPingsOut,
			ReconnectWait: DefaultReconnectWait, RequestTimeout: DefaultRequestTimeout, Heartbeat: DefaultHeartbeat,
			ReportCursor: true},
		Queue: QueueConfig{Size: DefaultQueueSize, AgingStep: DefaultAgingStep},
		Store: StoreConfig{Synchronous: DefaultStoreSynchronous, MaxBatch: DefaultStoreMaxBatch, Retention: DefaultRetention,
			PruneInterval: DefaultPruneInterval},
		Clock: ClockConfig{MaxSkew: DefaultMaxSkew, OnSkew: DefaultOnSkew, JumpThreshold: DefaultJumpThreshold},
		Outbox: OutboxConfig{Window: DefaultOutboxWindow, Linger: DefaultOutboxLinger, Hold: DefaultOutboxHold, CoalesceSkipped: true,
			SkippedWindow: DefaultSkippedWindow},
		Shutdown: ShutdownConfig{Grace: DefaultShutdownGrace},
		Log:      LogConfig{Format: DefaultLogFormat, Level: DefaultLogLevel},
	}
}

func cfgErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks every key; the error names the first bad one, e.g.
// "clock.max_skew: must be > 0".
func (c Config) Validate() error {
	if err := protocol.ValidateName("id", c.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := protocol.ValidateLabels("labels", c.Labels); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.DataDir == "" || !filepath.IsAbs(c.DataDir) {
		return cfgErr("data_dir", "must be an absolute directory, got %q", c.DataDir)
	}
	if c.Workers < 1 || c.Workers > 4096 {
		return cfgErr("workers", "must be between 1 and 4096, got %d", c.Workers)
	}
	if c.MemoryLimitMiB < 0 || c.MemoryLimitMiB > 1<<20 {
		return cfgErr("memory_limit_mib", "must be between 0 (none) and %d, got %d", 1<<20, c.MemoryLimitMiB)
	}
	if c.ReleasePagesAfter != 0 && (c.ReleasePagesAfter < time.Second || c.ReleasePagesAfter > 24*time.Hour) {
		return cfgErr("release_pages_after", "must be 0 (never) or between 1s and 24h, got %s", c.ReleasePagesAfter)
	}
	if c.NATS.URL == "" {
		return cfgErr("nats.url", "is required")
	}
	if c.NATS.Creds != "" && c.NATS.Token != "" {
		return cfgErr("nats.token", "is exclusive with nats.creds")
	}
	if (c.NATS.TLS.CertFile == "") != (c.NATS.TLS.KeyFile == "") {
		return cfgErr("nats.tls.cert_file", "nats.tls.cert_file and nats.tls.key_file go together (client certificate)")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"nats.ping_interval", c.NATS.PingInterval}, {"nats.reconnect_wait", c.NATS.ReconnectWait},
		{"nats.request_timeout", c.NATS.RequestTimeout}, {"nats.heartbeat", c.NATS.Heartbeat},
		{"queue.aging_step", c.Queue.AgingStep}, {"store.retention", c.Store.Retention},
		{"store.prune_interval", c.Store.PruneInterval},
		{"clock.max_skew", c.Clock.MaxSkew}, {"clock.jump_threshold", c.Clock.JumpThreshold},
		{"shutdown.grace", c.Shutdown.Grace}} {
		if d.v <= 0 {
			return cfgErr(d.key, "must be > 0, got %s", d.v)
		}
	}
	if c.NATS.MaxPingsOut < 1 {
		return cfgErr("nats.max_pings_out", "must be ≥ 1, got %d", c.NATS.MaxPingsOut)
	}
	if c.Queue.Size < 16 || c.Queue.Size > 1<<20 {
		return cfgErr("queue.size", "must be between 16 and %d, got %d", 1<<20, c.Queue.Size)
	}
	switch c.Store.Synchronous {
	case store.SyncFull, store.SyncNormal:
	default:
		return cfgErr("store.synchronous", "must be full or normal, got %q", c.Store.Synchronous)
	}
	if c.Store.MaxBatch < 1 || c.Store.MaxBatch > 10000 {
		return cfgErr("store.max_batch", "must be between 1 and 10000, got %d", c.Store.MaxBatch)
	}
	switch c.Clock.OnSkew {
	case SkewRefuse, SkewAdopt:
	default:
		return cfgErr("clock.on_skew", "must be refuse or adopt, got %q", c.Clock.OnSkew)
	}
	for i, p := range c.Exec.Allow {
		if !filepath.IsAbs(p) {
			return cfgErr(fmt.Sprintf("exec.allow[%d]", i), "%q must be an absolute path or glob", p)
		}
		if _, err := filepath.Match(p, "/"); err != nil {
			return cfgErr(fmt.Sprintf("exec.allow[%d]", i), "%q: %v", p, err)
		}
	}
	for i, n := range c.Exec.EnvAllow {
		if err := handler.CheckEnvAllowName(n); err != nil {
			return cfgErr(fmt.Sprintf("exec.env_allow[%d]", i), "%q %v", n, err)
		}
	}
	for i, code := range c.Exec.PermanentExitCodes {
		if code < 1 || code > 255 {
			return cfgErr(fmt.Sprintf("exec.permanent_exit_codes[%d]", i), "must be between 1 and 255, got %d", code)
		}
	}
	for i, p := range c.HTTP.Allow {
		if err := handler.CheckAllowURL(p); err != nil {
			return cfgErr(fmt.Sprintf("http.allow[%d]", i), "%q %v", p, err)
		}
	}
	if c.Outbox.Window < 1 || c.Outbox.Window > 65536 {
		return cfgErr("outbox.window", "must be between 1 and 65536, got %d", c.Outbox.Window)
	}
	if c.Outbox.Linger < 0 || c.Outbox.Linger > time.Second {
		return cfgErr("outbox.linger", "must be between 0 and 1s, got %s", c.Outbox.Linger)
	}
	if c.Outbox.Hold < 0 || c.Outbox.Hold > MaxOutboxHold {
		return cfgErr("outbox.hold", "must be between 0 and %s, got %s", MaxOutboxHold, c.Outbox.Hold)
	}
	if c.Outbox.SkippedWindow < time.Second || c.Outbox.SkippedWindow > MaxSkippedWindow {
		return cfgErr("outbox.skipped_window", "must be between 1s and %s, got %s", MaxSkippedWindow, c.Outbox.SkippedWindow)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		return cfgErr("log.format", "must be json or text, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return cfgErr("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	return nil
}

// Masked returns a copy with secrets replaced by "*****" (for --print-config).
func (c Config) Masked() Config {
	if c.NATS.Token != "" {
		c.NATS.Token = "*****"
	}
	if c.NATS.Creds != "" {
		c.NATS.Creds = "***** (" + filepath.Base(c.NATS.Creds) + ")"
	}
	return c
}

// StorePath is the SQLite file.
func (c Config) StorePath() string { return filepath.Join(c.DataDir, "agent.db") }
