package apiv1

import (
	"encoding/json"

	"github.com/axsched/ax/pkg/protocol"
)

// Page sizes of the list routes (the limit parameter).
const (
	// DefaultListLimit is the page size when a list request gives no limit.
	DefaultListLimit = 100
	// MaxListLimit is the largest page a list request may ask for.
	MaxListLimit = 1000
)

// Bounds of POST /v1/jobs:batch.
const (
	// MaxBatchJobs is the most jobs one batch may hold.
	MaxBatchJobs = 1000
	// MaxBatchBody is the largest body the route reads.
	MaxBatchBody = 8 << 20
)

// JobList is the body of GET /v1/jobs.
type JobList struct {
	Jobs []protocol.Job `json:"jobs"`
	// Next is the cursor of the next page (the after parameter); empty at the end.
	Next string `json:"next"`
}

// ExecutionList is the body of GET /v1/executions.
type ExecutionList struct {
	Executions []protocol.Execution `json:"executions"`
	// Next is the cursor of the next page (the after parameter); empty at the end.
	Next string `json:"next"`
}

// JobBatch is the body of POST /v1/jobs:batch.
type JobBatch struct {
	// Jobs are created each on its own, as POST /v1/jobs would
	// (1 to MaxBatchJobs).
	Jobs []json.RawMessage `json:"jobs"`
}

// JobBatchResult is the answer of POST /v1/jobs:batch: one item per job,
// in the order of the request.
type JobBatchResult struct {
	Results []JobBatchItem `json:"results"`
}

// JobBatchItem is one job's outcome: the status POST /v1/jobs would have
// answered, and the created job or the error (its field prefixed with
// jobs[i].).
type JobBatchItem struct {
	Status int           `json:"status"`
	Job    *protocol.Job `json:"job,omitempty"`
	Error  *ErrorBody    `json:"error,omitempty"`
}
