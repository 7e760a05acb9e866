package protocol

import (
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// ReportKind names an agent's local step of an execution.
type ReportKind string

// Report kinds.
const (
	// ReportTriggered: the execution was fired (a periodic fire the agent made, or a run command's run_at reached).
	ReportTriggered ReportKind = "triggered"
	// ReportRunning: a handler started the attempt.
	ReportRunning ReportKind = "running"
	// ReportFinished: the attempt ended; Outcome and Result say how.
	ReportFinished ReportKind = "finished"
	// ReportSkipped: the fire was dropped (overlap=forbid, misfire=skip); Reason says which.
	ReportSkipped ReportKind = "skipped"
	// ReportInterrupted: the agent restarted while the attempt ran (retryable).
	ReportInterrupted ReportKind = "interrupted"
	// ReportFenced: the agent dropped an attempt of a group job without
	// running it, because the job's lease had moved on from the attempt's
	// epoch (a newer epoch here, or the job unassigned). Epoch is required;
	// Reason says why. The controller counts the attempt as lost and retries
	// it on the job's current holder.
	ReportFenced ReportKind = "fenced"
)

// MaxMessageLen bounds a result message (stdout/stderr tails, panic stacks).
const MaxMessageLen = 16 << 10

// Report is a message on ax.rpt.<shard>.<agent>, published from the agent's
// outbox with Nats-Msg-Id = MsgID().
type Report struct {
	V           int        `json:"v"`
	Agent       string     `json:"agent"`
	JobID       string     `json:"job_id"`
	ExecID      string     `json:"exec_id"`
	Attempt     int        `json:"attempt"`
	Kind        ReportKind `json:"kind"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	// At is when the step happened, on the agent's clock corrected by its offset.
	At time.Time `json:"at"`
	// Epoch is the lease epoch the agent fired under (group jobs); 0 otherwise.
	Epoch uint64 `json:"epoch,omitempty"`
	// Outcome and Result are set on finished reports.
	Outcome retry.Outcome `json:"outcome,omitempty"`
	Result  *retry.Result `json:"result,omitempty"`
	// Duration is the attempt's run time (finished reports).
	Duration Duration `json:"duration,omitempty"`
	// RetryAfter is the least wait before the next attempt that the
	// attempt's target asked for (an HTTP Retry-After), on finished reports
	// of a retryable failure only; 0..retry.MaxDelayLimit. The controller
	// waits max(backoff, RetryAfter), RetryAfter capped by the job's
	// retry.max.
	RetryAfter Duration `json:"retry_after,omitempty"`
	// Lag is how late the attempt was dequeued after its scheduled time:
	// on running reports, and on later ones that carry StartedAt.
	Lag Duration `json:"lag,omitempty"`
	// Reason says why a fire was skipped or an attempt interrupted.
	Reason string `json:"reason,omitempty"`
	// Shard is set on broadcast jobs: which slot of the group this agent is.
	Shard *ShardSlot `json:"shard,omitempty"`
	// TriggeredAt and StartedAt let one report stand for the steps before it.
	// An agent whose outbox still holds the triggered and running reports of an
	// attempt when it finishes may send only the finished report, with these
	// set; the controller then applies TRIGGERED, RUNNING and the final state
	// in one write. A later stray earlier step of the same attempt is stale.
	TriggeredAt time.Time `json:"triggered_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	// SkippedCount, on a skipped report, is how many fires of the job it
	// stands for when the agent coalesced them (overload): at least 2, the
	// first at FirstScheduledAt, the last at ScheduledAt. Absent: one fire,
	// at ScheduledAt. Optional (added within version 2): a controller that
	// predates it refuses such a report as an unknown field, so agents send
	// it only when configured to (see the README's upgrade notes).
	SkippedCount     int       `json:"skipped_count,omitempty"`
	FirstScheduledAt time.Time `json:"first_scheduled_at,omitzero"`
}

// MaxSkippedCount bounds Report.SkippedCount.
const MaxSkippedCount = 1 << 30

// Fires is how many fires a report stands for: SkippedCount on a
// coalesced skipped report, else 1.
func (r Report) Fires() int { return max(r.SkippedCount, 1) }

// MsgID returns the report's JetStream message id, exec_id/attempt/kind.
// AX_RPT de-duplicates by Msg-Id across every agent and an agent may put
// any Msg-Id on its own reports, so ax-agent prefixes it with a random
// salt of its process ("<salt>/<exec_id>/<attempt>/<kind>", kept in its
// outbox for every republish): no other agent can guess it and have the
// report dropped as a duplicate by publishing it first.
func (r Report) MsgID() string { return ReportMsgID(r.ExecID, r.Attempt, r.Kind) }

// Validate checks a report.
func (r Report) Validate() error {
	if err := checkVersion(r.V); err != nil {
		return err
	}
	if err := ValidateName("agent", r.Agent); err != nil {
		return err
	}
	if err := ValidateJobID("job_id", r.JobID); err != nil {
		return err
	}
	jobID, _, err := ParseExecID("exec_id", r.ExecID)
	if err != nil {
		return err
	}
	if jobID != r.JobID {
		return invalid("exec_id", "%q does not belong to job %q", r.ExecID, r.JobID)
	}
	if r.Attempt < 1 || r.Attempt > MaxAttempt {
		return invalid("attempt", "must be between 1 and %d, got %d", MaxAttempt, r.Attempt)
	}
	if r.At.IsZero() {
		return invalid("at", "is required")
	}
	if len(r.Reason) > 256 {
		return invalid("reason", "is longer than 256 bytes")
	}
	switch r.Kind {
	case ReportTriggered, ReportRunning, ReportSkipped, ReportInterrupted, ReportFenced:
		if r.Outcome != "" || r.Result != nil {
			return invalid("outcome", "is only valid on finished reports")
		}
		if r.Kind == ReportFenced && r.Epoch == 0 {
			return invalid("epoch", "is required on fenced reports (the lease epoch the attempt was sent under)")
		}
	case ReportFinished:
		if err := validateOutcome(r.Outcome); err != nil {
			return err
		}
		if r.Result == nil {
			return invalid("result", "is required on finished reports")
		}
		if len(r.Result.Message) > MaxMessageLen {
			return invalid("result.message", "is %d bytes, at most %d allowed", len(r.Result.Message), MaxMessageLen)
		}
	case "":
		return invalid("kind", "is required")
	default:
		return invalid("kind", "unknown report kind %q", r.Kind)
	}
	if !r.StartedAt.IsZero() && r.Kind != ReportFinished && r.Kind != ReportInterrupted {
		return invalid("started_at", "is only valid on finished and interrupted reports")
	}
	if !r.TriggeredAt.IsZero() && r.Kind != ReportFinished && r.Kind != ReportInterrupted && r.Kind != ReportRunning {
		return invalid("triggered_at", "is only valid on running, finished and interrupted reports")
	}
	if err := r.validateSkippedCount(); err != nil {
		return err
	}
	if r.Duration < 0 {
		return invalid("duration", "must not be negative")
	}
	if r.RetryAfter != 0 {
		switch {
		case r.RetryAfter < 0 || r.RetryAfter.D() > retry.MaxDelayLimit:
			return invalid("retry_after", "must be between 0s and %s, got %s", retry.MaxDelayLimit, r.RetryAfter)
		case r.Kind != ReportFinished || r.Outcome != retry.OutcomeFailure || !r.Result.Retryable:
			return invalid("retry_after", "is only valid on finished reports of a retryable failure")
		}
	}
	if r.Shard != nil && (r.Shard.Total < 1 || r.Shard.Index < 0 || r.Shard.Index >= r.Shard.Total) {
		return invalid("shard", "index %d of total %d is out of range", r.Shard.Index, r.Shard.Total)
	}
	return nil
}

// validateSkippedCount checks the fields of a coalesced skipped report.
func (r Report) validateSkippedCount() error {
	if r.SkippedCount == 0 && r.FirstScheduledAt.IsZero() {
		return nil
	}
	switch {
	case r.Kind != ReportSkipped:
		if r.SkippedCount != 0 {
			return invalid("skipped_count", "is only valid on skipped reports")
		}
		return invalid("first_scheduled_at", "is only valid on skipped reports")
	case r.SkippedCount < 2 || r.SkippedCount > MaxSkippedCount:
		return invalid("skipped_count", "must be between 2 and %d (omit it for one fire), got %d", MaxSkippedCount, r.SkippedCount)
	case r.FirstScheduledAt.IsZero():
		return invalid("first_scheduled_at", "is required with skipped_count")
	case !r.FirstScheduledAt.Before(r.ScheduledAt):
		return invalid("first_scheduled_at", "must be before scheduled_at (%s), got %s", r.ScheduledAt.Format(time.RFC3339Nano),
			r.FirstScheduledAt.Format(time.RFC3339Nano))
	}
	return nil
}

func validateOutcome(o retry.Outcome) error {
	switch o {
	case retry.OutcomeSuccess, retry.OutcomeFailure, retry.OutcomeTimeout, retry.OutcomePanic,
		retry.OutcomeInterrupted, retry.OutcomeAgentLost, retry.OutcomeCancelled:
		return nil
	case "":
		return invalid("outcome", "is required on finished reports")
	}
	return invalid("outcome", "unknown outcome %q", o)
}

// DecodeReport decodes and validates a report.
func DecodeReport(data []byte) (Report, error) { return Decoder{}.Report(data) }

// Report is DecodeReport with d.Fast tried first.
func (d Decoder) Report(data []byte) (Report, error) { return decodeAsWith[Report](d.Fast, data) }
