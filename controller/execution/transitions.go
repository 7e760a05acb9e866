package execution

import "github.com/axsched/ax/pkg/protocol"

// StateNone is the "from" state of an execution that has no record yet.
const StateNone protocol.State = ""

// transitions is the execution state machine of docs/architecture.md (State machine), in one place:
// the set of allowed (from, to) pairs, each with the cause that makes it.
// Every state change Apply makes is checked against it (CheckTransition).
//
//	PENDING ──► TRIGGERED ──► RUNNING ──► SUCCESS
//	   │            │            ├──────► FAILED
//	   │            │            └──────► RETRY_WAITING ──► TRIGGERED (attempt+1)
//	   │            ├─ not started, agent restarted late ─► SKIPPED (misfire)
//	   │            └─ agent lost, fenced ─► RETRY_WAITING or FAILED
//	   │                 RETRY_WAITING ── retry fenced ─► RETRY_WAITING (attempt+1) or FAILED
//	   └────────────┴────────────┴──────► CANCELLED (from any non-terminal state)
//	SKIPPED: a fire dropped by overlap=forbid or misfire=skip, recorded.
var transitions = map[protocol.State]map[protocol.State]string{
	StateNone: {
		protocol.StatePending:   "controller-started run (asap/at/delay, trigger)",
		protocol.StateTriggered: "periodic fire made by the agent",
		protocol.StateSkipped:   "periodic fire dropped by the agent (overlap, misfire)",
	},
	protocol.StatePending: {
		protocol.StateTriggered: "run command fired on the agent",
		protocol.StateSkipped:   "run command dropped by the agent (overlap, misfire)",
		protocol.StateCancelled: "cancelled",
	},
	protocol.StateTriggered: {
		protocol.StateRunning:      "handler started",
		protocol.StateSkipped:      "periodic fire not started when its agent stopped, dropped at restart by misfire",
		protocol.StateRetryWaiting: "agent lost (its group lease lapsed) with attempts left",
		protocol.StateFailed:       "agent lost (its group lease lapsed) with attempts spent",
		protocol.StateCancelled:    "cancelled",
	},
	protocol.StateRunning: {
		protocol.StateSuccess:      "handler succeeded",
		protocol.StateFailed:       "not retryable, attempts spent, or timeout without on_timeout",
		protocol.StateRetryWaiting: "retryable failure with attempts left",
		protocol.StateCancelled:    "cancelled",
	},
	protocol.StateRetryWaiting: {
		protocol.StateTriggered: "next attempt fired on the agent",
		// The attempt the retry sent counts as lost, the next one waits.
		protocol.StateRetryWaiting: "the retry sent was dropped unrun by its agent (fenced: its group lease had moved on), attempts left",
		protocol.StateFailed:       "the retry was sent to an agent that was lost or dropped it (fenced), and attempts are spent",
		protocol.StateCancelled:    "cancelled",
	},
	protocol.StateFailed: {
		// The only way out of a terminal state: an operator's retry
		// (OperatorRetry) gives a FAILED execution a new attempt.
		protocol.StateRetryWaiting: "manual retry",
	},
}

// CheckTransition reports whether an execution may move from one state to
// another (from is StateNone for an execution without a record). A
// refused pair is a *TransitionError with the reason (errors.Is
// ErrTransition).
func CheckTransition(from, to protocol.State) error {
	if from != StateNone && !from.Valid() {
		return &TransitionError{From: from, To: to, Reason: "unknown from state"}
	}
	if !to.Valid() {
		return &TransitionError{From: from, To: to, Reason: "unknown to state"}
	}
	if _, ok := transitions[from][to]; ok {
		return nil
	}
	switch {
	case from == to:
		return &TransitionError{From: from, To: to, Reason: "already in this state"}
	case from.Terminal():
		return &TransitionError{From: from, To: to, Reason: "execution is terminal"}
	case from == StateNone:
		return &TransitionError{From: from, To: to, Reason: "an execution starts PENDING, TRIGGERED or SKIPPED"}
	default:
		return &TransitionError{From: from, To: to, Reason: "not an edge of the state machine"}
	}
}

// TransitionCause returns the documented cause of an allowed transition, or "".
func TransitionCause(from, to protocol.State) string { return transitions[from][to] }
