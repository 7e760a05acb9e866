package streams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	// the start's 11 CPU-seconds reading them back (bench/README.md, stop
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

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("invalid streams config")

// Config says how to create the streams and buckets.
type Config struct {
	// Replicas is the replica count of every stream and bucket (1 or 3, or 5).
	Replicas int
	// Memory puts streams in memory instead of files (tests, benchmarks).
	Memory bool
	// CommandMaxAge, EventMaxAge, Duplicates (AX_RPT's) and LeaseTTL override the defaults when > 0.
	CommandMaxAge time.Duration
	EventMaxAge   time.Duration
	Duplicates    time.Duration
	LeaseTTL      time.Duration
	// ControllerDuplicates is the de-duplication window of AX_EVT;
	// DefaultControllerDuplicates when 0, and never longer than Duplicates.
	// AX_CMD's is CommandDuplicates.
	ControllerDuplicates time.Duration
	// ReportMaxBytes and ReportMaxAge bound AX_RPT (defaults
	// DefaultReportMaxBytes, DefaultReportMaxAge when 0). The stream discards
	// new reports when full (DiscardNew): the publisher gets an error and
	// keeps the report, nothing accepted is dropped for room.
	ReportMaxBytes int64
	ReportMaxAge   time.Duration
	// ReportMaxPerSubject bounds the reports AX_RPT holds on one subject,
	// that is of one agent and shard (DefaultReportMaxPerSubject when 0, at
	// least MinReportMaxPerSubject). Past it the stream refuses that agent's
	// new reports of the shard (DiscardNewPerSubject) and the agent keeps
	// them in its outbox, publishing them again as the controller applies
	// those before: an enrolled agent that floods reports fills its own
	// subjects, not the stream, so the other agents' reports are neither
	// refused nor queued behind more than this many of its own per shard.
	ReportMaxPerSubject int64
	// CommandMaxConsumers overrides DefaultCommandMaxConsumers when > 0.
	CommandMaxConsumers int
	// ReportShards is the controllers' shard count (protocol.DefaultShards
	// when 0, at most protocol.MaxShards). AX_RPT takes the reports of the
	// shard tokens 0 .. max(ReportShards, DefaultShards)-1 only, those a
	// report consumer reads: a publish on another token (an enrolled
	// agent may publish on ax.rpt.<any token>.<itself>) matches no stream
	// and is stored nowhere, instead of taking room until the upkeep
	// purges it.
	ReportShards int
}

func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.CommandMaxAge == 0 {
		c.CommandMaxAge = DefaultCommandMaxAge
	}
	if c.EventMaxAge == 0 {
		c.EventMaxAge = DefaultEventMaxAge
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ControllerDuplicates == 0 {
		c.ControllerDuplicates = DefaultControllerDuplicates
	}
	c.ControllerDuplicates = min(c.ControllerDuplicates, c.Duplicates)
	if c.CommandMaxConsumers <= 0 {
		c.CommandMaxConsumers = DefaultCommandMaxConsumers
	}
	if c.ReportMaxBytes == 0 {
		c.ReportMaxBytes = DefaultReportMaxBytes
		if c.Memory {
			c.ReportMaxBytes = DefaultReportMaxBytesMemory
		}
	}
	if c.ReportMaxAge == 0 {
		c.ReportMaxAge = DefaultReportMaxAge
	}
	if c.ReportMaxPerSubject == 0 {
		c.ReportMaxPerSubject = DefaultReportMaxPerSubject(c.ReportMaxBytes, c.reportTokens())
	}
	return c
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Replicas < 0 || c.Replicas > 5 {
		return fmt.Errorf("%w: replicas: must be between 1 and 5, got %d", ErrConfig, c.Replicas)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"command_max_age", c.CommandMaxAge}, {"event_max_age", c.EventMaxAge}, {"duplicates", c.Duplicates}, {"lease_ttl", c.LeaseTTL}, {"controller_duplicates", c.ControllerDuplicates}} {
		if f.d < 0 {
			return fmt.Errorf("%w: %s: must not be negative", ErrConfig, f.name)
		}
	}
	if c.ReportMaxBytes != 0 && c.ReportMaxBytes < MinReportMaxBytes {
		return fmt.Errorf("%w: report_max_bytes: must be at least %d (1 MiB), got %d", ErrConfig, MinReportMaxBytes, c.ReportMaxBytes)
	}
	if c.ReportShards < 0 || c.ReportShards > protocol.MaxShards {
		return fmt.Errorf("%w: report_shards: must be between 1 and %d, got %d", ErrConfig, protocol.MaxShards, c.ReportShards)
	}
	if c.ReportMaxPerSubject != 0 && c.ReportMaxPerSubject < MinReportMaxPerSubject {
		return fmt.Errorf("%w: report_max_per_subject: must be at least %d, got %d", ErrConfig, MinReportMaxPerSubject, c.ReportMaxPerSubject)
	}
	if c.ReportMaxAge != 0 && c.ReportMaxAge < MinReportMaxAge {
		return fmt.Errorf("%w: report_max_age: must be at least %s, got %s", ErrConfig, MinReportMaxAge, c.ReportMaxAge)
	}
	return nil
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

func (c Config) storage() jetstream.StorageType {
	if c.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// StreamConfigs returns the configs of AX_CMD, AX_RPT and AX_EVT.
func (c Config) StreamConfigs() []jetstream.StreamConfig {
	c = c.withDefaults()
	return []jetstream.StreamConfig{
		{
			Name:         protocol.StreamCommands,
			Description:  "ax controller → agent commands",
			Subjects:     []string{protocol.SubjectCommandsAll},
			Retention:    jetstream.LimitsPolicy,
			MaxAge:       c.CommandMaxAge,
			MaxConsumers: c.CommandMaxConsumers,
			MaxMsgSize:   protocol.MaxMessageSize,
			Storage:      c.storage(),
			Replicas:     c.Replicas,
			Duplicates:   CommandDuplicates,
		},
		{
			Name:        protocol.StreamReports,
			Description: "ax agent → controller reports",
			Subjects:    c.reportSubjects(),
			Retention:   jetstream.WorkQueuePolicy,
			MaxBytes:    c.ReportMaxBytes,
			MaxAge:      c.ReportMaxAge,
			Discard:     jetstream.DiscardNew,
			// One subject is one agent's reports of one shard.
			MaxMsgsPerSubject:    c.ReportMaxPerSubject,
			DiscardNewPerSubject: true,
			MaxMsgSize:           protocol.MaxMessageSize,
			Storage:              c.storage(),
			Replicas:             c.Replicas,
			Duplicates:           c.Duplicates,
		},
		{
			Name:        protocol.StreamEvents,
			Description: "ax execution state-change events",
			Subjects:    []string{protocol.SubjectEventsAll},
			// Stored on a bounded set of subjects (protocol.EventStoredSource).
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source: protocol.EventStoredSource, Destination: protocol.EventStoredDestination,
			},
			Retention:  jetstream.LimitsPolicy,
			MaxAge:     c.EventMaxAge,
			MaxMsgSize: protocol.MaxMessageSize,
			Storage:    c.storage(),
			Replicas:   c.Replicas,
			Duplicates: c.ControllerDuplicates,
		},
	}
}

// reportTokens is how many shard tokens AX_RPT takes: ReportShards, at
// least protocol.DefaultShards.
func (c Config) reportTokens() int { return max(c.ReportShards, protocol.DefaultShards) }

// reportSubjects are AX_RPT's subjects: one per shard token a report
// consumer reads (Config.ReportShards).
func (c Config) reportSubjects() []string {
	out := make([]string, c.reportTokens())
	for i := range out {
		out[i] = protocol.ReportShardSubject(i)
	}
	return out
}

// KVConfigs returns the configs of the KV buckets.
func (c Config) KVConfigs() []jetstream.KeyValueConfig {
	c = c.withDefaults()
	kv := func(name, desc string, history uint8, ttl time.Duration) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, History: history, TTL: ttl,
			Storage: c.storage(), Replicas: c.Replicas, MaxValueSize: protocol.MaxMessageSize}
	}
	// The controllers' liveness digests: up to 1 MiB a value (one value
	// holds a share of a large fleet), a key not written for an hour is
	// removed (a stopped replica's).
	livenessKV := kv(protocol.BucketLiveness, "ax controllers' heartbeat digests", 1, LivenessTTL)
	livenessKV.MaxValueSize = 1 << 20
	// The buckets whose keys the controller removes with purge markers
	// take per-message TTLs (MarkerTTL).
	marked := func(k jetstream.KeyValueConfig) jetstream.KeyValueConfig {
		k.LimitMarkerTTL = MarkerTTL
		return k
	}
	return []jetstream.KeyValueConfig{
		marked(kv(protocol.BucketJobs, "ax job specs", 1, 0)),
		marked(kv(protocol.BucketExecs, "ax executions", 1, 0)),
		marked(kv(protocol.BucketIdem, "ax idempotency keys", 1, 0)),
		kv(protocol.BucketAgents, "ax agents", 1, 0),
		kv(protocol.BucketLeases, "ax leases", 1, c.LeaseTTL),
		kv(protocol.BucketEpochs, "ax group-job lease grants (epoch history)", 1, 0),
		livenessKV,
		kv(protocol.BucketMarks, "ax controllers' write marks", 1, 0),
	}
}

// Ensure creates or updates the streams and buckets; calling it again with
// the same config changes nothing. A stream or bucket whose stored config
// is the one Ensure last applied with these settings (ConfigKey) is left
// as it is: a start of a controller after its first asks the server for no
// update (each rewrites the stream's meta file, and one of a stream with a
// MaxAge reads its first message block: with a long history, megabytes).
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (Buckets, error) {
	if err := cfg.Validate(); err != nil {
		return Buckets{}, err
	}
	for _, sc := range cfg.StreamConfigs() {
		digest, err := configDigest(sc)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
		have, err := storedConfig(ctx, js, sc.Name)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
		if have != nil && have.Metadata[ConfigKey] == digest {
			continue
		}
		if have != nil && sc.Name == protocol.StreamReports {
			keepMetadata(have, &sc, ReportShardsKey)
		}
		setMetadata(&sc.Metadata, ConfigKey, digest)
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	// Per-message TTLs need JetStream API level 1 (nats-server 2.11).
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return Buckets{}, fmt.Errorf("ensure buckets: %w", err)
	}
	serverTTL := info.API.Level >= 1
	b := Buckets{MsgTTL: true}
	dst := []*jetstream.KeyValue{&b.Jobs, &b.Execs, &b.Idem, &b.Agents, &b.Leases, &b.Epochs, &b.Liveness, &b.Marks}
	for i, kc := range cfg.KVConfigs() {
		kv, ttl, err := ensureBucket(ctx, js, kc, serverTTL)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
		}
		*dst[i] = kv
		if kc.LimitMarkerTTL > 0 && !ttl {
			b.MsgTTL = false
		}
	}
	return b, nil
}

// ensureBucket binds bucket kc when its stream has the config Ensure last
// applied (ConfigKey, and KVDuplicates), and creates or updates it
// otherwise; ttl is whether the bucket's stream takes per-message TTLs.
//
// kc's LimitMarkerTTL (MarkerTTL) is left out of the digest, so that an ax
// built before it, whose digest is the same, binds the bucket as it is
// instead of updating it without TTLs, which the server refuses once a
// stream takes them: rolling back stays possible. A bucket bound with the
// digest but without TTLs (made by such an ax) is given them by an update
// of its own. A server that has no per-message TTLs (JetStream API level
// 0: before 2.11; serverTTL false) gets the bucket without.
func ensureBucket(ctx context.Context, js jetstream.JetStream, kc jetstream.KeyValueConfig, serverTTL bool) (kv jetstream.KeyValue, ttl bool, err error) {
	markerTTL := kc.LimitMarkerTTL
	kc.LimitMarkerTTL = 0
	digest, err := configDigest(kc)
	if err != nil {
		return nil, false, err
	}
	if !serverTTL {
		markerTTL = 0
	}
	have, err := storedConfig(ctx, js, KVStream(kc.Bucket))
	if err != nil {
		return nil, false, err
	}
	if have != nil && have.Metadata[ConfigKey] == digest && have.Duplicates == KVDuplicates {
		if markerTTL > 0 && !have.AllowMsgTTL {
			if err := allowMsgTTL(ctx, js, *have, markerTTL); err != nil {
				return nil, false, err
			}
		}
		kv, err := js.KeyValue(ctx, kc.Bucket)
		return kv, markerTTL > 0 || have.AllowMsgTTL, err
	}
	setMetadata(&kc.Metadata, ConfigKey, digest)
	if have != nil && have.AllowMsgTTL {
		markerTTL = max(markerTTL, have.SubjectDeleteMarkerTTL, time.Second)
	}
	kc.LimitMarkerTTL = markerTTL
	kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
	if err != nil {
		return nil, false, err
	}
	if err := shortenDuplicates(ctx, js, KVStream(kc.Bucket)); err != nil {
		return nil, false, err
	}
	return kv, markerTTL > 0, nil
}

// allowMsgTTL updates the stream of config cfg to take per-message TTLs
// as a bucket with LimitMarkerTTL d has them.
func allowMsgTTL(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, d time.Duration) error {
	cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL = true, d
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("allow message TTLs: %w", err)
	}
	return nil
}

// ConfigKey is the key of a stream's metadata where Ensure records a digest
// of the config it applied (the stream's, or the bucket's), so that a
// later Ensure with the same settings leaves the stream alone. A config of
// another version of ax, or with other settings, has another digest and is
// applied.
const ConfigKey = "ax_config"

// configDigest returns the digest of cfg that Ensure records under
// ConfigKey: SHA-256 of its JSON, the first 16 bytes in hex.
func configDigest(cfg any) (string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("config digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// storedConfig returns the config the server holds for stream name, nil
// when there is no such stream.
func storedConfig(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamConfig, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg := st.CachedInfo().Config
	return &cfg, nil
}

// setMetadata sets key k of *m to v, making the map when there is none.
func setMetadata(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// ReportShardsKey is the key of AX_RPT's metadata that records the shard
// count its report consumers were made for (controller/ingest writes and
// checks it; the count is fixed once the stream exists). The report
// consumers keep their state in memory, so the stream, not a consumer,
// has to remember it across a restart of the server.
const ReportShardsKey = "ax_shards"

// keepMetadata copies the keys of the stream's stored metadata (have) into
// sc, so that Ensure's update keeps what another part of ax recorded there
// instead of dropping it.
func keepMetadata(have *jetstream.StreamConfig, sc *jetstream.StreamConfig, keys ...string) {
	for _, k := range keys {
		if v, ok := have.Metadata[k]; ok {
			setMetadata(&sc.Metadata, k, v)
		}
	}
}

// shortenDuplicates sets the de-duplication window of the bucket stream
// name to KVDuplicates. nats.go's CreateOrUpdateKeyValue sets its own
// window each time, so a start updates the stream twice; the server
// recovers a stream with the window it last stored, this one.
func shortenDuplicates(ctx context.Context, js jetstream.JetStream, name string) error {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("duplicate window: %w", err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Duplicates == KVDuplicates {
		return nil
	}
	cfg.Duplicates = KVDuplicates
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("duplicate window: %w", err)
	}
	return nil
}
