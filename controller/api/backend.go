package api

import (
	"context"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/protocol"
)

// Backend is what the HTTP layer needs from the controller.
// *controller.Controller satisfies it.
type Backend interface {
	// Ready returns nil once the backend can serve requests (controller.ErrNotReady otherwise).
	Ready(ctx context.Context) error

	// CreateJob stores a new job and returns it with its id.
	CreateJob(ctx context.Context, j protocol.Job) (protocol.Job, error)
	// CreateJobs stores new jobs, each on its own, and returns one result per job.
	CreateJobs(ctx context.Context, jobs []protocol.Job) ([]controller.JobResult, error)
	// GetJob returns one job.
	GetJob(ctx context.Context, id string) (protocol.Job, error)
	// ListJobs returns one page of jobs and the cursor of the next page ("" at the end).
	ListJobs(ctx context.Context, f controller.JobFilter) ([]protocol.Job, string, error)
	// UpdateJob replaces the spec of a job.
	UpdateJob(ctx context.Context, id string, j protocol.Job) (protocol.Job, error)
	// DeleteJob removes a job.
	DeleteJob(ctx context.Context, id string) error
	// PauseJob stops a job from firing.
	PauseJob(ctx context.Context, id string) (protocol.Job, error)
	// ResumeJob lets a paused job fire again.
	ResumeJob(ctx context.Context, id string) (protocol.Job, error)
	// TriggerJob starts an execution of a job now.
	TriggerJob(ctx context.Context, id string) (protocol.Execution, error)

	// GetExecution returns one execution.
	GetExecution(ctx context.Context, execID string) (protocol.Execution, error)
	// ListExecutions returns one page of executions and the cursor of the next page.
	ListExecutions(ctx context.Context, f controller.ExecFilter) ([]protocol.Execution, string, error)
	// RetryExecution starts a new attempt of a finished execution.
	RetryExecution(ctx context.Context, execID string) (protocol.Execution, error)
	// CancelExecution cancels a non-terminal execution.
	CancelExecution(ctx context.Context, execID string) (protocol.Execution, error)

	// ListAgentPage returns one page of the agents matching f, the cursor
	// of the next page and the counts per state of all that match.
	ListAgentPage(ctx context.Context, f controller.AgentFilter) (controller.AgentPage, error)
}
