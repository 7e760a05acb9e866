package retry

// Outcome is how one attempt ended.
type Outcome string

// Outcomes.
const (
	// OutcomeSuccess: the handler returned without error.
	OutcomeSuccess Outcome = "success"
	// OutcomeFailure: the handler returned an error; its Result says whether
	// retrying can help.
	OutcomeFailure Outcome = "failure"
	// OutcomeTimeout: the attempt ran past its timeout and was stopped. The
	// handler may or may not have had its effect.
	OutcomeTimeout Outcome = "timeout"
	// OutcomePanic: the handler panicked (recovered by the agent).
	OutcomePanic Outcome = "panic"
	// OutcomeInterrupted: the agent restarted while the attempt was running.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeAgentLost: the agent running the attempt was lost (its lease
	// expired) before it reported an end.
	OutcomeAgentLost Outcome = "agent_lost"
	// OutcomeCancelled: an operator cancelled the execution.
	OutcomeCancelled Outcome = "cancelled"
)

// Valid reports whether o is one of the Outcome constants.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeSuccess, OutcomeFailure, OutcomeTimeout, OutcomePanic,
		OutcomeInterrupted, OutcomeAgentLost, OutcomeCancelled:
		return true
	}
	return false
}

// Result is what a handler reports about one attempt: {code, message,
// retryable}. A failure says whether retrying can help (HTTP 503 yes, 400 no).
type Result struct {
	// Code is the handler's code: the HTTP status for http, the exit code
	// for exec, anything for Go handlers.
	Code int `json:"code"`
	// Message is a short human-readable explanation.
	Message string `json:"message,omitempty"`
	// Retryable says whether another attempt can succeed.
	Retryable bool `json:"retryable"`
}
