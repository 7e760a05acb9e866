package protocol

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Stream names, subjects and KV buckets (docs/architecture.md: Streams and buckets).
const (
	// StreamCommands holds controller → agent commands on ax.cmd.<agent>.
	StreamCommands = "AX_CMD"
	// StreamReports holds agent → controller reports on ax.rpt.<shard>.<agent> (work-queue).
	StreamReports = "AX_RPT"
	// StreamEvents holds state-change events, published on
	// ax.evt.<state>.<job> and stored on ax.evt.<state>.<partition>
	// (EventStoredSource).
	StreamEvents = "AX_EVT"

	// SubjectCommandsAll matches every command subject.
	SubjectCommandsAll = "ax.cmd.>"
	// SubjectReportsAll matches every report subject (AX_RPT takes only
	// those of the shard tokens a report consumer reads, ReportShardSubject).
	SubjectReportsAll = "ax.rpt.>"
	// SubjectEventsAll matches every event subject.
	SubjectEventsAll = "ax.evt.>"
	// EventStoredSource and EventStoredDestination are AX_EVT's subject
	// transform: an event published on ax.evt.<state>.<job> is stored on
	// ax.evt.<state>.<n>, n one of EventPartitions partitions of the job
	// id (a job's retirement is published on its partition already,
	// JobRetiredSubject). The server keeps an in-memory index entry for
	// every distinct subject a stream holds, and AX_EVT holds the events
	// of history.retention (7 days by default): a subject per one-shot job
	// would make that index grow with every job of the retention, about
	// 135 bytes each. Subscribers of the subjects
	// (a plain NATS client on ax.evt.FAILED.>) see the published subject;
	// a consumer of AX_EVT that wants one job's events filters on the
	// event's job_id.
	EventStoredSource = "ax.evt.*.*"
	// EventStoredDestination: see EventStoredSource.
	EventStoredDestination = "ax.evt.{{wildcard(1)}}.{{partition(16,2)}}"
	// EventPartitions is the number of partitions in EventStoredDestination
	// (its 16: TestEventStoredSubjectMatchesServer fails when they differ).
	EventPartitions = 16
	// SubjectRegisterAll matches every registration request.
	SubjectRegisterAll = "ax.reg.*"
	// SubjectHeartbeatAll matches every heartbeat request.
	SubjectHeartbeatAll = "ax.hb.*"

	// BucketJobs holds job specs by job id.
	BucketJobs = "ax_jobs"
	// BucketExecs holds executions by exec id.
	BucketExecs = "ax_execs"
	// BucketIdem maps idempotency keys to job ids (Create is the unique constraint).
	BucketIdem = "ax_idem"
	// BucketAgents holds agent registrations and liveness.
	BucketAgents = "ax_agents"
	// BucketLeases holds group-job and shard leases (bucket TTL, History 1).
	BucketLeases = "ax_leases"
	// BucketEpochs holds, per group job, the bounded history of its lease
	// grants (epoch → agent), which authorizes reports made under an
	// earlier epoch. No TTL: it outlives the lease keys.
	BucketEpochs = "ax_epochs"
	// BucketLiveness holds each controller replica's digest of the agent
	// heartbeats it answered (bucket TTL, History 1); only controllers
	// read and write it.
	BucketLiveness = "ax_liveness"
	// BucketMarks holds each controller process's write mark (no TTL,
	// History 1): the time before which every execution record it wrote
	// has its command and events stored (controller/writemark). Only
	// controllers read and write it.
	BucketMarks = "ax_marks"

	// DefaultShards is the default number of report shards.
	DefaultShards = 16
	// MaxShards bounds the shard count.
	MaxShards = 1024
)

// CommandSubject is the subject of commands to one agent.
func CommandSubject(agent string) string { return "ax.cmd." + agent }

// ReportSubject is the subject an agent publishes a report of shard to.
func ReportSubject(shard int, agent string) string {
	return "ax.rpt." + strconv.Itoa(shard) + "." + agent
}

// ReportSubjectShard returns the shard token of a report subject
// ax.rpt.<shard>.<agent>; ok is false when the subject has another shape or
// the token is not a decimal number below MaxShards.
func ReportSubjectShard(subject string) (shard int, ok bool) {
	const prefix = "ax.rpt."
	if len(subject) <= len(prefix) || subject[:len(prefix)] != prefix {
		return 0, false
	}
	rest := subject[len(prefix):]
	n, i := 0, 0
	for ; i < len(rest) && rest[i] != '.'; i++ {
		c := rest[i]
		if c < '0' || c > '9' || i >= 4 || (i == 1 && rest[0] == '0') {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if i == 0 || i == len(rest) || n >= MaxShards {
		return 0, false
	}
	return n, true
}

// ReportShardSubject matches every report of one shard.
func ReportShardSubject(shard int) string { return "ax.rpt." + strconv.Itoa(shard) + ".>" }

// EventSubject is the subject of a state-change event.
func EventSubject(state State, jobID string) string { return "ax.evt." + string(state) + "." + jobID }

// EventStoredSubject is the subject AX_EVT stores an event published on
// EventSubject(state, jobID) on: the server's partition of the job id
// (EventStoredDestination), FNV-1a modulo EventPartitions, as nats-server
// computes it (TestEventStoredSubjectMatchesServer holds it to the server).
func EventStoredSubject(state State, jobID string) string {
	return "ax.evt." + string(state) + "." + eventPartition(jobID)
}

// eventPartition is nats-server's {{partition(EventPartitions,2)}} of a
// subject whose second wildcard token is jobID: FNV-1a modulo the count,
// the hash Shard takes.
func eventPartition(jobID string) string { return strconv.Itoa(Shard(jobID, EventPartitions)) }

// JobRetiredSubject is the subject of a job's retirement (JobRetired):
// ax.evt.job.retired.<n>, n the job id's partition (as EventStoredSubject),
// so that AX_EVT holds a bounded number of them. Controllers before
// 2026-12-05 published on ax.evt.job.retired.<job>, which AX_EVT may still
// hold; IsJobRetiredSubject takes both.
func JobRetiredSubject(jobID string) string { return jobRetiredPrefix + eventPartition(jobID) }

// jobRetiredPrefix begins every job retirement's subject, of this version
// and earlier ones.
const jobRetiredPrefix = "ax.evt.job.retired."

// IsJobRetiredSubject reports whether a message of AX_EVT on subject is a
// job's retirement (JobRetired) rather than an execution's event.
func IsJobRetiredSubject(subject string) bool {
	return len(subject) > len(jobRetiredPrefix) && strings.HasPrefix(subject, jobRetiredPrefix)
}

// RegisterSubject is the registration request subject of an agent.
func RegisterSubject(agent string) string { return "ax.reg." + agent }

// HeartbeatSubject is the heartbeat request subject of an agent.
func HeartbeatSubject(agent string) string { return "ax.hb." + agent }

// InboxPrefix is the reply-inbox prefix of an agent. Agents use it instead of
// _INBOX so that their permissions can be limited to their own replies.
func InboxPrefix(agent string) string { return "_INBOX_ax." + agent }

// CommandConsumerPrefix starts the name of every consumer an agent reads
// its commands with ("<agent>~"; '~' is not allowed in agent ids, so the
// prefix names one agent). The controller's consumer gateway refuses
// consumers of other names (controller/auth).
func CommandConsumerPrefix(agent string) string { return agent + "~" }

// Shard returns the shard of a job: FNV-1a of the job id modulo shards.
// shards must be ≥ 1.
func Shard(jobID string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(jobID))
	return int(h.Sum32() % uint32(shards))
}
