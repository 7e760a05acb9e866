package ingest

import (
	"errors"

	"github.com/axsched/ax/controller/execution"
)

// Reasons of ax_reports_rejected_total (the label reason).
const (
	RejectInvalid     = "invalid"        // undecodable or invalid message
	RejectDuplicate   = "duplicate"      // (exec_id, attempt, kind) already applied
	RejectOldAttempt  = "old_attempt"    // attempt older than the execution's
	RejectOldEpoch    = "old_epoch"      // lease epoch older than the execution's
	RejectTerminal    = "terminal"       // execution already terminal
	RejectUnknownExec = "unknown_exec"   // no record and the kind cannot create one
	RejectFuture      = "future_attempt" // attempt ahead of the execution's
	RejectTransition  = "transition"     // the state machine refuses the change
	RejectWrongAgent  = "wrong_agent"    // sent on another agent's subject, or for an attempt not sent to this agent
	RejectUnknownJob  = "unknown_job"    // a fire of a job that does not exist
	RejectNotAssigned = "not_assigned"   // the agent may not fire the job (not its pinned agent, group member, or the epoch's holder)
	RejectBadShard    = "bad_shard"      // the subject's shard token is not the job's shard (or no consumer reads it)
)

// rejectReason is a report refusal decided by the ingest rather than by
// the state machine (AuthorizeCreate, the history): its metric label.
type rejectReason string

// Error returns the label.
func (r rejectReason) Error() string { return string(r) }

// rejectLabel returns the ax_reports_rejected_total reason of a refusal.
func rejectLabel(err error) string {
	var rr rejectReason
	switch {
	case errors.As(err, &rr):
		return string(rr)
	case errors.Is(err, execution.ErrDuplicate):
		return RejectDuplicate
	case errors.Is(err, execution.ErrOldAttempt):
		return RejectOldAttempt
	case errors.Is(err, execution.ErrOldEpoch):
		return RejectOldEpoch
	case errors.Is(err, execution.ErrWrongAgent):
		return RejectWrongAgent
	case errors.Is(err, execution.ErrTerminal):
		return RejectTerminal
	case errors.Is(err, execution.ErrFuture):
		return RejectFuture
	case errors.Is(err, execution.ErrUnknownExec):
		return RejectUnknownExec
	case errors.Is(err, execution.ErrTransition):
		return RejectTransition
	default:
		return RejectInvalid
	}
}
