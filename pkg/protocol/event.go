package protocol

import (
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// Event is a state-change event on ax.evt.<STATE>.<job_id>. Anyone can
// subscribe with a plain NATS client: alerting to FAILED and RETRY_WAITING,
// monitoring to RUNNING and SUCCESS.
type Event struct {
	V       int    `json:"v"`
	JobID   string `json:"job_id"`
	ExecID  string `json:"exec_id"`
	Attempt int    `json:"attempt"`
	From    State  `json:"from,omitempty"`
	To      State  `json:"to"`
	// Reason says why (e.g. "agent_lost", "attempts_exhausted", "overlap").
	Reason  string        `json:"reason,omitempty"`
	At      time.Time     `json:"at"`
	Agent   string        `json:"agent,omitempty"`
	Outcome retry.Outcome `json:"outcome,omitempty"`
	Result  *retry.Result `json:"result,omitempty"`
	// NextAttemptAt is set on RETRY_WAITING.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Execution is the execution as it was right after this transition (a
	// snapshot of the stored record); the controllers' history index is
	// built from it. Nil when a later step of the same change follows at
	// once (the triggered and running steps of a report that also brings
	// the finish: the finished event carries the snapshot), and in events
	// of controllers before it was added.
	Execution *Execution `json:"execution,omitempty"`
}

// Validate checks an event.
func (e Event) Validate() error {
	if err := checkVersion(e.V); err != nil {
		return err
	}
	if err := ValidateJobID("job_id", e.JobID); err != nil {
		return err
	}
	jobID, _, err := ParseExecID("exec_id", e.ExecID)
	if err != nil {
		return err
	}
	if jobID != e.JobID {
		return invalid("exec_id", "%q does not belong to job %q", e.ExecID, e.JobID)
	}
	if e.Attempt < 1 || e.Attempt > MaxAttempt {
		return invalid("attempt", "must be between 1 and %d, got %d", MaxAttempt, e.Attempt)
	}
	if e.From != "" && !e.From.Valid() {
		return invalid("from", "unknown state %q", e.From)
	}
	if !e.To.Valid() {
		return invalid("to", "unknown state %q", e.To)
	}
	if e.At.IsZero() {
		return invalid("at", "is required")
	}
	if e.Agent != "" {
		if err := ValidateName("agent", e.Agent); err != nil {
			return err
		}
	}
	return nil
}

// DecodeEvent decodes and validates an event.
func DecodeEvent(data []byte) (Event, error) { return decodeAs[Event](data) }

// JobRetired is published on ax.evt.job.retired.<job_id> (JobRetiredSubject)
// when a one-shot job whose executions are all terminal leaves the live job
// set: it carries the job's last spec, for the controllers' history index.
// The subject has one more token than an Event's, so a subscriber of
// ax.evt.*.* (every state, every job) does not receive it.
type JobRetired struct {
	V   int       `json:"v"`
	Job Job       `json:"job"`
	At  time.Time `json:"at"`
}

// Validate checks a job retirement.
func (r JobRetired) Validate() error {
	if err := checkVersion(r.V); err != nil {
		return err
	}
	if err := ValidateJobID("job.id", r.Job.ID); err != nil {
		return err
	}
	if r.At.IsZero() {
		return invalid("at", "is required")
	}
	return nil
}

// DecodeJobRetired decodes and validates a job retirement.
func DecodeJobRetired(data []byte) (JobRetired, error) { return decodeAs[JobRetired](data) }
