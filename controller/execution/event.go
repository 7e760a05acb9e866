package execution

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Kind names an event type (for logs and tests).
type Kind string

// The event kinds, one per way an execution changes.
const (
	KindCreate         Kind = "create"
	KindReport         Kind = "report"
	KindPlace          Kind = "place"
	KindRetryDue       Kind = "retry_due"
	KindOperatorRetry  Kind = "operator_retry"
	KindOperatorCancel Kind = "operator_cancel"
	KindAgentLost      Kind = "agent_lost"
	KindJobDeleted     Kind = "job_deleted"
	KindExpiry         Kind = "expiry"
)

// Kinds lists every event kind.
var Kinds = []Kind{KindCreate, KindReport, KindPlace, KindRetryDue, KindOperatorRetry, KindOperatorCancel,
	KindAgentLost, KindJobDeleted, KindExpiry}

// Event is something that may change an execution. The types are the
// ones of this package; Apply dispatches on them.
type Event interface {
	// Kind names the event type.
	Kind() Kind
}

// Create makes the PENDING record of a controller-started run (a one-shot
// job's fire, a manual trigger): attempt 1 on Agent ("" while no agent of
// the job's group is known).
type Create struct {
	ExecID, JobID string
	Agent         string
	ScheduledAt   time.Time
	Shard         *protocol.ShardSlot
	Reason        string
}

// Report is one report of an agent. It may stand for earlier steps of its
// attempt too (TriggeredAt, StartedAt set): those not applied yet apply
// with it, all or nothing.
type Report struct {
	protocol.Report
}

// Place gives a PENDING execution that waits for an agent of its group
// to Agent.
type Place struct {
	Agent string
}

// RetryDue is the retry timer of attempt Attempt firing: attempt+1 is sent.
// A retry of a group job (a record with an epoch) goes to the job's lease
// holder now: GroupAny says the job still targets a group (mode any),
// Held whether its lease has a holder, Holder and HolderEpoch who and
// under which epoch.
type RetryDue struct {
	Attempt     int
	GroupAny    bool
	Held        bool
	Holder      string
	HolderEpoch uint64
}

// OperatorRetry is an operator's retry of a FAILED execution: a new
// attempt now.
type OperatorRetry struct{}

// OperatorCancel is an operator's cancel of a non-terminal execution.
type OperatorCancel struct {
	Reason string // "" for "cancelled by operator"
}

// AgentLost is a group lease granted again, to NewAgent under Epoch: the
// executions of an earlier epoch that the previous holder had move on.
type AgentLost struct {
	NewAgent string
	Epoch    uint64
}

// JobDeleted says that the job of an execution is gone while attempt
// Attempt waits: its retry timer fired (RETRY_WAITING), or it is PENDING
// and no agent holds its run — none was placed (no agent), or Unsent: the
// caller knows the run was never sent (AX_CMD holds no run of it). A
// PENDING attempt whose run an agent may hold is left to run.
type JobDeleted struct {
	Attempt int
	Unsent  bool
}

// Expiry asks whether a terminal execution may leave live state: it ended
// Grace or longer ago.
type Expiry struct {
	Grace time.Duration
}

// Kind implements Event.
func (Create) Kind() Kind { return KindCreate }

// Kind implements Event.
func (Report) Kind() Kind { return KindReport }

// Kind implements Event.
func (Place) Kind() Kind { return KindPlace }

// Kind implements Event.
func (RetryDue) Kind() Kind { return KindRetryDue }

// Kind implements Event.
func (OperatorRetry) Kind() Kind { return KindOperatorRetry }

// Kind implements Event.
func (OperatorCancel) Kind() Kind { return KindOperatorCancel }

// Kind implements Event.
func (AgentLost) Kind() Kind { return KindAgentLost }

// Kind implements Event.
func (JobDeleted) Kind() Kind { return KindJobDeleted }

// Kind implements Event.
func (Expiry) Kind() Kind { return KindExpiry }

// Env is what Apply needs from outside and never reads itself: the
// controller's time, the job's retry policy, randomness for the jitter,
// and the check that lets a report create a record.
type Env struct {
	// Now is the controller's time of the change (updated_at).
	Now time.Time
	// Policy returns the job's retry policy with defaults; nil means
	// retry.DefaultPolicy. It is called only when a decision needs it.
	Policy func() retry.Policy
	// Rand draws the retry jitter (rand.Int64N); nil: no jitter.
	Rand func(int64) int64
	// AuthorizeCreate says whether a report may create the record of an
	// execution without one (a periodic fire the agent made): nil error
	// when it may. It is called only then, at most once per step. A
	// *Rejection it returns is passed on as it is (Early respected); any
	// other error is wrapped. nil: always allowed.
	AuthorizeCreate func() error
}

func (e Env) policy() retry.Policy {
	if e.Policy == nil {
		return retry.DefaultPolicy()
	}
	return e.Policy()
}
