package handler

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// Result is a built-in handler's answer about one attempt. It says the
// outcome explicitly: the code is only information (an HTTP status, an exit
// code, -1 when there is none), never what decides success.
type Result struct {
	// Outcome is retry.OutcomeSuccess or retry.OutcomeFailure. The agent
	// records a timeout or a cancel instead when the attempt's context
	// ended, whatever the handler returned.
	Outcome retry.Outcome
	// Result holds the code, the message and, for a failure, whether
	// another attempt can help.
	retry.Result
	// RetryAfter is how long the server asked to wait before another
	// attempt (HTTP Retry-After on a retryable failure), at most
	// retry.MaxDelayLimit; 0 when it did not say.
	RetryAfter time.Duration
}

// refused is a failure no retry can fix, with no code: the attempt was
// refused before anything ran.
func refused(format string, args ...any) Result {
	return Result{Outcome: retry.OutcomeFailure, Result: retry.Result{Code: -1, Message: fmt.Sprintf(format, args...)}}
}
