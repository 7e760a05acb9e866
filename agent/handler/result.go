package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Task is one attempt of an execution, as a handler sees it.
type Task struct {
	JobID string
	// ExecID is deterministic (<job_id>-<scheduled_unix_ms>): a handler that
	// writes to a business system uses it as its unique key.
	ExecID      string
	Attempt     int
	ScheduledAt time.Time
	Payload     json.RawMessage
	// Shard is set for broadcast (mode all) jobs.
	Shard *protocol.ShardSlot
	// Epoch is the lease epoch of a group job (mode any); 0 otherwise. exec
	// passes it as AX_EPOCH.
	Epoch uint64
}

// Result is a handler's answer about one attempt. Without an Outcome, Code
// 0 is a success and any other code a failure; a handler whose code is
// only information (an HTTP status, an exit code) says its Outcome. A
// failure says whether another attempt can help (Retryable: HTTP 503 yes,
// 400 no). A handler that returns after its context ended is recorded as
// timed out or cancelled, whatever it returns.
type Result struct {
	// Code is the handler's code: the HTTP status for http, the exit code
	// for exec, -1 when there is none, anything for Go handlers.
	Code int
	// Message is a short human-readable explanation.
	Message string
	// Retryable says whether another attempt can succeed.
	Retryable bool
	// RetryAfter is how long the server asked to wait before another
	// attempt (HTTP Retry-After on a retryable failure), at most
	// retry.MaxDelayLimit; 0 when it did not say.
	RetryAfter time.Duration
	// Outcome is retry.OutcomeSuccess or retry.OutcomeFailure, or empty:
	// then Code decides (0 success).
	Outcome retry.Outcome
}

// Verdict returns the result's outcome: Outcome, or by Code when it is empty.
func (r Result) Verdict() retry.Outcome {
	switch {
	case r.Outcome != "":
		return r.Outcome
	case r.Code == 0:
		return retry.OutcomeSuccess
	}
	return retry.OutcomeFailure
}

// Record is what is stored and reported of the result (retry.Result, the
// wire record: code, message, retryable).
func (r Result) Record() retry.Result {
	return retry.Result{Code: r.Code, Message: r.Message, Retryable: r.Retryable}
}

// Func runs one attempt. It must honour ctx: the attempt's timeout and
// cancel commands end it.
type Func func(ctx context.Context, t Task) Result

// refused is a failure no retry can fix, with no code: the attempt was
// refused before anything ran.
func refused(format string, args ...any) Result {
	return Result{Outcome: retry.OutcomeFailure, Code: -1, Message: fmt.Sprintf(format, args...)}
}

// withRecord is a result of outcome o holding a classified record.
func withRecord(o retry.Outcome, r retry.Result) Result {
	return Result{Outcome: o, Code: r.Code, Message: r.Message, Retryable: r.Retryable}
}
