package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/axsched/ax/pkg/protocol"
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
	// Epoch is the lease epoch of a group job (mode any); 0 otherwise.
	Epoch uint64
}

// Result is a handler's answer. Code 0 is success; any other code is a
// failure, and Retryable says whether trying again can help (HTTP 503 yes,
// 400 no). A handler that returns after its context ended is recorded as
// timed out or cancelled, whatever it returns.
type Result struct {
	Code      int
	Message   string
	Retryable bool
}

// HandlerFunc runs one attempt. It must honour ctx: the attempt's timeout
// and cancel commands end it.
type HandlerFunc func(ctx context.Context, t Task) Result
