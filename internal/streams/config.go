package streams

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

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
