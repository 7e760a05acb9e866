package protocol

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// Event is a state-change event on ax.evt.<STATE>.<job_id>. Anyone can
// subscribe with a plain NATS client: alerting to FAILED and RETRY_WAITING,
// monitoring to RUNNING and SUCCESS.
//
// One event stands for one change the controller stored: when that change
// made several transitions at once (an agent's report that brings the
// triggered, running and finished steps of a fast run together), the
// event is published on the subject of the state reached (To), From is
// the state before the first of them and Via lists the states passed
// through in between, in order. A subscriber of RUNNING therefore sees
// the runs that the controller learned of while they ran; one that needs
// every state an execution passed through reads Path.
type Event struct {
	V       int    `json:"v"`
	JobID   string `json:"job_id"`
	ExecID  string `json:"exec_id"`
	Attempt int    `json:"attempt"`
	From    State  `json:"from,omitempty"`
	// Via lists the states passed through between From and To by the
	// one change this event stands for (empty for a single transition).
	Via []State `json:"via,omitempty"`
	To  State   `json:"to"`
	// Reason says why (e.g. "agent_lost", "attempts_exhausted", "overlap").
	Reason  string        `json:"reason,omitempty"`
	At      time.Time     `json:"at"`
	Agent   string        `json:"agent,omitempty"`
	Outcome retry.Outcome `json:"outcome,omitempty"`
	Result  *retry.Result `json:"result,omitempty"`
	// NextAttemptAt is set on RETRY_WAITING.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Execution is the execution as it was right after this change (a
	// snapshot of the stored record); the controllers' history index is
	// built from it. Nil in events of older controllers: those built
	// before it was added, and those that published a report's triggered
	// and running steps as events of their own ahead of its finished one.
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
	if len(e.Via) > MaxEventVia {
		return invalid("via", "at most %d states, got %d", MaxEventVia, len(e.Via))
	}
	for i, st := range e.Via {
		if !st.Valid() {
			return invalid(fmt.Sprintf("via[%d]", i), "unknown state %q", st)
		}
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

// MaxEventVia bounds Event.Via: one change passes through at most the
// triggered and running states on its way (two), with room to spare.
const MaxEventVia = 8

// Path returns the states the event's change entered, in order: Via, then
// To.
func (e Event) Path() []State {
	out := make([]State, 0, len(e.Via)+1)
	return append(append(out, e.Via...), e.To)
}

// DecodeEvent decodes and validates an event.
func DecodeEvent(data []byte) (Event, error) { return decodeAs[Event](data) }

// JobRetired is published on ax.evt.job.retired.<n> (JobRetiredSubject: n
// the job id's partition)
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
