package protocol

// State is the state of an execution in the controller's state machine
// (docs/architecture.md: State machine).
type State string

// Execution states.
const (
	StatePending      State = "PENDING"
	StateTriggered    State = "TRIGGERED"
	StateRunning      State = "RUNNING"
	StateSuccess      State = "SUCCESS"
	StateFailed       State = "FAILED"
	StateRetryWaiting State = "RETRY_WAITING"
	StateCancelled    State = "CANCELLED"
	// StateSkipped records a fire dropped by overlap=forbid or misfire=skip.
	StateSkipped State = "SKIPPED"
)

// States lists every state, in the order of the diagram.
var States = []State{StatePending, StateTriggered, StateRunning, StateSuccess, StateFailed, StateRetryWaiting, StateCancelled, StateSkipped}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	switch s {
	case StateSuccess, StateFailed, StateCancelled, StateSkipped:
		return true
	}
	return false
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}
