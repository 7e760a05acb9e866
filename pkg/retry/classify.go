package retry

import (
	"fmt"
	"slices"
)

// ClassifyHTTP turns an HTTP response status into a Result with Code =
// status:
//
//   - 2xx: success (Retryable false, no Message);
//   - 408 Request Timeout, 425 Too Early, 429 Too Many Requests and 5xx:
//     retryable, except 501 Not Implemented and 505 HTTP Version Not
//     Supported, which no retry can fix;
//   - every other status (1xx, 3xx, other 4xx) and values outside 100..599:
//     not retryable.
//
// Use HTTPOutcome for the Outcome that goes with it.
func ClassifyHTTP(status int) Result {
	r := Result{Code: status}
	switch {
	case status >= 200 && status <= 299:
		return r
	case status < 100 || status > 599:
		r.Message = fmt.Sprintf("invalid HTTP status %d", status)
	case status == 408 || status == 425 || status == 429:
		r.Message, r.Retryable = fmt.Sprintf("HTTP %d", status), true
	case status == 501 || status == 505:
		r.Message = fmt.Sprintf("HTTP %d", status)
	case status >= 500:
		r.Message, r.Retryable = fmt.Sprintf("HTTP %d", status), true
	default:
		r.Message = fmt.Sprintf("HTTP %d", status)
	}
	return r
}

// HTTPOutcome is OutcomeSuccess for 2xx statuses and OutcomeFailure otherwise.
func HTTPOutcome(status int) Outcome {
	if status >= 200 && status <= 299 {
		return OutcomeSuccess
	}
	return OutcomeFailure
}

// ClassifyExit turns a process exit code into a Result with Code = code:
// 0 is success; a code listed in permanent is a failure no retry can fix;
// any other non-zero code is a retryable failure. A negative code (the
// process was killed by a signal, as os.ProcessState.ExitCode reports it) is
// retryable too; a kill by the agent's own timeout is reported as
// OutcomeTimeout, not through this function.
func ClassifyExit(code int, permanent []int) Result {
	r := Result{Code: code}
	switch {
	case code == 0:
		return r
	case code < 0:
		r.Message, r.Retryable = "killed by a signal", true
	case slices.Contains(permanent, code):
		r.Message = fmt.Sprintf("exit status %d (permanent)", code)
	default:
		r.Message, r.Retryable = fmt.Sprintf("exit status %d", code), true
	}
	return r
}

// ExitOutcome is OutcomeSuccess for exit code 0 and OutcomeFailure otherwise.
func ExitOutcome(code int) Outcome {
	if code == 0 {
		return OutcomeSuccess
	}
	return OutcomeFailure
}
