package protocol

import (
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// Execution is one firing of a job as the controller records it (KV
// ax_execs) and shows it (API, CLI). Attempts count within it.
type Execution struct {
	ExecID  string `json:"exec_id"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	State   State  `json:"state"`
	// Agent is the agent that ran (or will run) the current attempt.
	Agent       string    `json:"agent,omitempty"`
	ScheduledAt time.Time `json:"scheduled_at"`
	CreatedAt   time.Time `json:"created_at"`
	// UpdatedAt is when the execution last changed (the controller's
	// clock). Pointing a retry that waits at another agent (a group job's
	// lease moved) does not change it: it stays the time of the
	// RETRY_WAITING, so next_attempt_at − updated_at is the backoff.
	UpdatedAt time.Time `json:"updated_at"`
	// TriggeredAt, StartedAt and FinishedAt are the agent-reported times of the current attempt.
	TriggeredAt time.Time `json:"triggered_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// NextAttemptAt is when a RETRY_WAITING execution runs its next attempt.
	NextAttemptAt time.Time     `json:"next_attempt_at,omitzero"`
	Outcome       retry.Outcome `json:"outcome,omitempty"`
	Result        *retry.Result `json:"result,omitempty"`
	// Reason explains the last transition ("attempts_exhausted", "agent_lost", "overlap", ...).
	Reason string `json:"reason,omitempty"`
	// Suspect marks an execution whose handler may have had its effect
	// although it did not report success (a timeout not retried).
	Suspect bool `json:"suspect,omitempty"`
	// Epoch is the lease epoch of the current attempt (group jobs).
	Epoch uint64 `json:"epoch,omitempty"`
	// Shard is the broadcast slot (mode all jobs).
	Shard *ShardSlot `json:"shard,omitempty"`
	// Lag is how late the current attempt started after its scheduled time.
	Lag Duration `json:"lag,omitempty"`
	// Duration is the run time of the last finished attempt.
	Duration Duration `json:"duration,omitempty"`
	// SkippedCount and FirstScheduledAt are set on a SKIPPED record that
	// stands for several fires of the job coalesced by its agent under
	// overload (Report.SkippedCount): FirstScheduledAt..ScheduledAt.
	SkippedCount     int       `json:"skipped_count,omitempty"`
	FirstScheduledAt time.Time `json:"first_scheduled_at,omitzero"`
}

// Fires is how many fires the record stands for: SkippedCount on a
// coalesced SKIPPED record, else 1.
func (e Execution) Fires() int { return max(e.SkippedCount, 1) }

// AgentInfo is what the controller knows of an agent (KV ax_agents, API, CLI).
type AgentInfo struct {
	Agent    string            `json:"agent"`
	Labels   map[string]string `json:"labels,omitempty"`
	Handlers []string          `json:"handlers,omitempty"`
	Version  string            `json:"version,omitempty"`
	OS       string            `json:"os,omitempty"`
	Arch     string            `json:"arch,omitempty"`
	// Online is true while heartbeats arrive within the controller's offline timeout.
	Online       bool      `json:"online"`
	RegisteredAt time.Time `json:"registered_at"`
	LastSeen     time.Time `json:"last_seen"`
	// HeartbeatAt is when the agent's last heartbeat arrived (zero before
	// the first); Stats are from that heartbeat.
	HeartbeatAt time.Time `json:"heartbeat_at,omitempty"`
	// StoppedAt is when the agent said it was stopping (a clean shutdown);
	// it counts as offline until it registers or heartbeats again.
	StoppedAt time.Time `json:"stopped_at,omitempty"`
	// Boot names the agent process that registered last (Register.Boot).
	Boot  string `json:"boot,omitempty"`
	Stats Stats  `json:"stats"`
	// ClockOffset is controller time minus agent time, as last measured.
	ClockOffset Duration `json:"clock_offset,omitempty"`
	// Leases are the group-job leases the agent holds.
	Leases []HeldLease `json:"leases,omitempty"`
	// Revoked agents may not connect.
	Revoked bool `json:"revoked,omitempty"`
	// NoCommandConsumer is set (in listings, never stored) on an online
	// agent that had no command consumer on AX_CMD in the controller's last
	// two checks: it receives no commands, it is not ready.
	NoCommandConsumer bool `json:"no_command_consumer,omitempty"`
	// LabelsFrom says who set Labels (LabelsFromEnrollment,
	// LabelsFromRegistration, LabelsFromOperator); empty in a record of an
	// older controller, whose labels are kept. A registration does not
	// change the Labels of an agent the controller has a record of.
	LabelsFrom string `json:"labels_from,omitempty"`
	// Cursor is the highest command cursor the agent reported when
	// registering; a registration below it means the agent's store lost
	// its state.
	Cursor uint64 `json:"cursor,omitempty"`
}

// Sources of AgentInfo.Labels.
const (
	// LabelsFromEnrollment: given at `agent enroll` (nats.auth: nkeys).
	LabelsFromEnrollment = "enrollment"
	// LabelsFromRegistration: taken from the agent's first registration
	// (no enrollment: nats.auth none or an external NATS server).
	LabelsFromRegistration = "registration"
	// LabelsFromOperator: set by `agent label` (POST /v1/agents/{id}:label).
	LabelsFromOperator = "operator"
)
