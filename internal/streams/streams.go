package streams

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Defaults.
const (
	// DefaultCommandMaxAge keeps commands for agents offline this long.
	DefaultCommandMaxAge = 7 * 24 * time.Hour
	// DefaultEventMaxAge keeps state-change events this long.
	DefaultEventMaxAge = 7 * 24 * time.Hour
	// DefaultDuplicates is the de-duplication window of report Msg-Ids
	// (AX_RPT): an agent publishes a report again from its outbox when it
	// did not get the PubAck, after its link comes back. Within the window
	// the stream drops the copy; after it the copy is stored and the
	// controller refuses it from the live record or the history, so the
	// window saves work and protects nothing more. Every Msg-Id within it
	// costs the server about 240 bytes and is read back at each start: at
	// 500 reports a second, 10 minutes hold 300,000 of them, 2 hours 3.6
	// million.
	DefaultDuplicates = 10 * time.Minute
	// DefaultControllerDuplicates is the de-duplication window of AX_EVT,
	// a stream only the controller publishes to, when
	// Config.ControllerDuplicates is 0. The controller publishes an event
	// again only soon after the first (a publish retried, a report
	// redelivered after its ack wait), so a short window serves. Every
	// Msg-Id within a window costs the server about 240 bytes of memory
	// and is read back at each start.
	DefaultControllerDuplicates = 2 * time.Minute
	// CommandDuplicates is the de-duplication window of AX_CMD: the least
	// the server takes (KVDuplicates). A command stored twice changes
	// nothing at its agent — an attempt is stored once (its SQLite key is
	// exec_id and attempt), an assignment by generation, a lease epoch
	// never moves back — and a reload reads the commands AX_CMD holds
	// (their Msg-Id headers) before it sends one again, so a window would
	// de-duplicate nothing that matters. What it would cost: the server
	// holds every Msg-Id within a window in memory (about 240 bytes) and
	// reads them all back at each start. With 2 minutes, 300,000 delayed
	// one-shots created in a minute held 300,000 run-command Msg-Ids (about
	// 70 MB), left the process that made them at 327–351 MiB once they
	// expired (315 MiB without them: their entries had been allocated among
	// the long-lived ones), and a kill -9 right after them spent 0.56 of
	// the start's 11 CPU-seconds reading them back (bench/JOURNAL.md, stop
	// 52).
	CommandDuplicates = KVDuplicates
	// KVDuplicates is the de-duplication window of the buckets' streams:
	// the least the server takes. No writer of a bucket sets a Msg-Id (a
	// write is checked by the key's revision instead), so a window
	// de-duplicates nothing there; but at each start the server reads back
	// every message written within a stream's window to rebuild its
	// Msg-Ids, and nats.go gives a bucket 2 minutes: after 300,000 creates,
	// a restart within them read 600,000 values of ax_jobs and ax_execs
	// for nothing.
	KVDuplicates = 100 * time.Millisecond
	// LivenessTTL is the bucket TTL of ax_liveness.
	LivenessTTL = time.Hour
	// DefaultLeaseTTL is the bucket TTL of ax_leases.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultReportMaxBytes bounds the bytes AX_RPT holds (reports not yet
	// applied): past it a publish is refused and the agent keeps the report
	// in its outbox.
	DefaultReportMaxBytes = 1 << 30
	// DefaultReportMaxBytesMemory is DefaultReportMaxBytes for streams in
	// memory (Config.Memory): the server reserves the bound in memory.
	DefaultReportMaxBytesMemory = 64 << 20
	// DefaultReportMaxAge bounds how long AX_RPT keeps a report no
	// controller applied. Past it the stream removes the report: alert
	// before (configs/prometheus/alerts.yml, AxReportsNotConsumed).
	DefaultReportMaxAge = 7 * 24 * time.Hour
	// DefaultCommandMaxConsumers is AX_CMD's consumer limit: every agent
	// reads its commands with one consumer (two for a moment while nats.go
	// rebuilds an ordered consumer). It is set on the stream because
	// nats-server otherwise applies its default of 1,000 consumers per
	// stream, and agents past it get no commands (error 10026).
	DefaultCommandMaxConsumers = 100_000
	// MinReportMaxBytes and MinReportMaxAge are the smallest bounds accepted.
	MinReportMaxBytes = 1 << 20
	MinReportMaxAge   = time.Hour
	// MinReportMaxPerSubject is the least ReportMaxPerSubject, given or
	// derived.
	MinReportMaxPerSubject = 64
	// reportShareOfAgent: one agent's reports, of the largest size on
	// every shard, take at most 1/reportShareOfAgent of ReportMaxBytes
	// (DefaultReportMaxPerSubject).
	reportShareOfAgent = 4
)

// DefaultReportMaxPerSubject is the number of reports AX_RPT holds at most
// on one subject (ax.rpt.<shard>.<agent>: one agent's reports of one shard)
// when Config.ReportMaxPerSubject is 0: what keeps one agent's reports, all
// of the largest size (protocol.MaxMessageSize) on every shard, within a
// quarter of maxBytes — 256 for the default 1 GiB and 16 shards — and at
// least MinReportMaxPerSubject.
func DefaultReportMaxPerSubject(maxBytes int64, shards int) int64 {
	n := maxBytes / (reportShareOfAgent * int64(max(shards, 1)) * protocol.MaxMessageSize)
	return max(n, MinReportMaxPerSubject)
}

// Buckets are the KV buckets of ax, opened by Ensure.
type Buckets struct {
	Jobs, Execs, Idem, Agents, Leases, Epochs, Liveness, Marks jetstream.KeyValue
	// MsgTTL is whether ax_jobs, ax_execs and ax_idem all take
	// per-message TTLs (MarkerTTL): false on a server before 2.11.
	MsgTTL bool
}

// MarkerTTL is the LimitMarkerTTL of ax_jobs, ax_execs and ax_idem. It is
// what makes the server take per-message TTLs (the Nats-TTL header) on
// them, so that the controller's purge markers leave the stream by
// themselves (controller/retention) instead of through a purge request
// each. The server places no marker of its own there: those buckets have
// no TTL (MaxAge), and a message that expires by its own TTL and is a
// purge marker itself is removed without one. A server before 2.11 has no
// per-message TTLs: Ensure makes the buckets without (Buckets.MsgTTL).
// Once a bucket takes TTLs the server does not let an update take them
// away; ensureBucket keeps the setting out of the config's digest so that
// an older ax does not try.
const MarkerTTL = time.Minute
