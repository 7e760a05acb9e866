package retry

import "time"

// Reasons a Decision gives: short machine-readable words for events, logs
// and metrics labels.
const (
	// ReasonSucceeded: the attempt succeeded; nothing to retry.
	ReasonSucceeded = "succeeded"
	// ReasonCancelled: the execution was cancelled; never retried.
	ReasonCancelled = "cancelled"
	// ReasonRetryable: a failure (or panic) whose Result says retrying can help.
	ReasonRetryable = "retryable"
	// ReasonNotRetryable: a failure whose Result says retrying cannot help.
	ReasonNotRetryable = "not_retryable"
	// ReasonPanic: the handler panicked and did not say retrying can help.
	ReasonPanic = "panic"
	// ReasonAttemptsExhausted: retrying would help but MaxAttempts are spent.
	ReasonAttemptsExhausted = "attempts_exhausted"
	// ReasonTimeoutRetry: a timeout, retried because the policy has OnTimeout.
	ReasonTimeoutRetry = "timeout_retry"
	// ReasonTimeoutSuspect: a timeout, not retried because OnTimeout is off.
	ReasonTimeoutSuspect = "timeout_suspect"
	// ReasonInterrupted: the agent restarted mid-attempt; retried.
	ReasonInterrupted = "interrupted"
	// ReasonAgentLost: the agent running the attempt was lost; retried.
	ReasonAgentLost = "agent_lost"
	// ReasonUnknownOutcome: the outcome is not one of the Outcome constants.
	ReasonUnknownOutcome = "unknown_outcome"
)

// Decision says what to do after an attempt ended.
type Decision struct {
	// Retry: schedule attempt+1 after Delay (RETRY_WAITING); otherwise the
	// execution ends (SUCCESS, FAILED or CANCELLED).
	Retry bool
	// Delay is the backoff before the next attempt; 0 unless Retry.
	Delay time.Duration
	// Reason is one of the Reason constants.
	Reason string
	// Suspect: the handler may have had its effect although no result says
	// so (timeout, interrupted, agent lost). Retrying such an attempt relies
	// on the handler being idempotent on exec_id; alerting may flag it.
	Suspect bool
}

// Decide applies the policy to an attempt's end. attempt is 1-based (values
// below 1 count as 1); an attempt may be retried only while attempt <
// MaxAttempts (MaxAttempts 0 counts as 1). The rules:
//
//   - success, cancelled: no retry.
//   - failure: retry iff r.Retryable (ReasonRetryable), else ReasonNotRetryable.
//   - panic: like failure — retried only if r.Retryable. The agent's panic
//     recovery reports Retryable false, so by default a panic is not
//     retried (ReasonPanic): a bug rarely fixes itself.
//   - timeout: Suspect. Retried iff OnTimeout (ReasonTimeoutRetry), else
//     ReasonTimeoutSuspect: the handler may have had its effect and is not
//     repeated blindly.
//   - interrupted, agent_lost: Suspect, and retried (ReasonInterrupted,
//     ReasonAgentLost). The handler may have run, but it receives exec_id,
//     the same on every attempt, to make its side effect idempotent; a run
//     that never reported must not be lost silently.
//   - any other outcome: no retry, Suspect, ReasonUnknownOutcome.
//
// Whenever a retry would otherwise happen but attempts are spent, the
// reason is ReasonAttemptsExhausted (Suspect as above). rnd is passed to
// Delay.
func (p Policy) Decide(attempt int, outcome Outcome, r Result, rnd func(int64) int64) Decision {
	attempt = max(attempt, 1)
	retry := func(reason string, suspect bool) Decision {
		if attempt >= max(p.MaxAttempts, 1) {
			return Decision{Reason: ReasonAttemptsExhausted, Suspect: suspect}
		}
		return Decision{Retry: true, Delay: p.Delay(attempt, rnd), Reason: reason, Suspect: suspect}
	}
	switch outcome {
	case OutcomeSuccess:
		return Decision{Reason: ReasonSucceeded}
	case OutcomeCancelled:
		return Decision{Reason: ReasonCancelled}
	case OutcomeFailure:
		if !r.Retryable {
			return Decision{Reason: ReasonNotRetryable}
		}
		return retry(ReasonRetryable, false)
	case OutcomePanic:
		if !r.Retryable {
			return Decision{Reason: ReasonPanic}
		}
		return retry(ReasonRetryable, false)
	case OutcomeTimeout:
		if !p.OnTimeout {
			return Decision{Reason: ReasonTimeoutSuspect, Suspect: true}
		}
		return retry(ReasonTimeoutRetry, true)
	case OutcomeInterrupted:
		return retry(ReasonInterrupted, true)
	case OutcomeAgentLost:
		return retry(ReasonAgentLost, true)
	default:
		return Decision{Reason: ReasonUnknownOutcome, Suspect: true}
	}
}
