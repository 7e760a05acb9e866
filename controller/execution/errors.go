package execution

import (
	"errors"
	"fmt"

	"github.com/axsched/ax/pkg/protocol"
)

// Sentinel errors of Apply. Every refusal is a *Rejection wrapping one of
// them (or the error Env.AuthorizeCreate returned); match with errors.Is.
var (
	// ErrDuplicate: the report step (exec_id, attempt, kind) was already applied.
	ErrDuplicate = errors.New("duplicate report")
	// ErrOldAttempt: the report is of an attempt older than the record's.
	ErrOldAttempt = errors.New("old attempt")
	// ErrOldEpoch: the report is under a lease epoch older than the record's.
	ErrOldEpoch = errors.New("old lease epoch")
	// ErrWrongAgent: the attempt belongs to another agent (or to none yet).
	ErrWrongAgent = errors.New("wrong agent")
	// ErrTerminal: the execution already ended.
	ErrTerminal = errors.New("execution is terminal")
	// ErrFuture: the report is of an attempt the controller has not sent yet.
	ErrFuture = errors.New("future attempt")
	// ErrUnknownExec: a report that cannot create the missing record.
	ErrUnknownExec = errors.New("unknown execution")
	// ErrTransition: the state machine has no such edge (*TransitionError).
	ErrTransition = errors.New("transition refused")
	// ErrInvalid: the event is malformed (unknown report kind, event type).
	ErrInvalid = errors.New("invalid event")
	// ErrExists: Create of an execution that already has a record.
	ErrExists = errors.New("execution exists")
	// ErrNoRecord: an event that needs a record (operator retry or cancel,
	// expiry) for an execution without one.
	ErrNoRecord = errors.New("execution has no record")
	// ErrMovedOn: the event was meant for a state the execution has left
	// (a retry timer of an attempt since triggered, an agent loss of an
	// execution already on the new holder): nothing to do.
	ErrMovedOn = errors.New("execution moved on")
	// ErrNotRetryable: an operator's retry of an execution that is not
	// FAILED, or whose attempts reached protocol.MaxAttempt.
	ErrNotRetryable = errors.New("execution cannot be retried")
	// ErrNoHolder: a retry of a group job while its lease has no holder.
	ErrNoHolder = errors.New("the group job's lease has no holder")
	// ErrNoAgent: a retry with no agent to run on.
	ErrNoAgent = errors.New("no agent to run on")
	// ErrNotExpired: Expiry of an execution that is live (not terminal,
	// or ended within the grace).
	ErrNotExpired = errors.New("execution not expired")
)

// Rejection is a refused event: Err is the sentinel (errors.Is/As see
// through it), Detail says why in words, Early marks a report that is
// ahead of its record (an earlier step has not arrived yet): it may apply
// later, so a consumer defers it instead of dropping it.
type Rejection struct {
	Err    error
	Detail string
	Early  bool
}

// Error returns "sentinel: detail".
func (r *Rejection) Error() string {
	if r.Detail == "" {
		return r.Err.Error()
	}
	return r.Err.Error() + ": " + r.Detail
}

// Unwrap returns the sentinel.
func (r *Rejection) Unwrap() error { return r.Err }

// IsEarly reports whether err is a Rejection of a report ahead of its record.
func IsEarly(err error) bool {
	var r *Rejection
	return errors.As(err, &r) && r.Early
}

// DetailOf returns a Rejection's detail, else err's text.
func DetailOf(err error) string {
	var r *Rejection
	if errors.As(err, &r) && r.Detail != "" {
		return r.Detail
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func reject(sentinel error, format string, args ...any) *Rejection {
	return &Rejection{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// TransitionError is a state change the transition table does not allow;
// Reason explains why. errors.Is(err, ErrTransition) is true.
type TransitionError struct {
	From, To protocol.State
	Reason   string
}

// Error returns "transition FROM → TO: reason".
func (e *TransitionError) Error() string {
	from := string(e.From)
	if from == "" {
		from = "(none)"
	}
	return fmt.Sprintf("transition %s → %s: %s", from, e.To, e.Reason)
}

// Is makes errors.Is(err, ErrTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrTransition }
