package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// JobFilter selects jobs in ListJobs; zero fields do not filter.
type JobFilter struct {
	Name, Handler, Agent, Group string
	// Paused, when set, selects paused (true) or active (false) jobs.
	Paused *bool
	// State is "live" (the default when empty) or "retired": the one-shot
	// jobs that left the live job set, from the history.
	State string
	// Limit is the page size (the server's default when 0).
	Limit int
	// After is the Next cursor of the previous page.
	After string
}

func (f JobFilter) values() url.Values {
	q := url.Values{}
	set(q, "name", f.Name)
	set(q, "handler", f.Handler)
	set(q, "agent", f.Agent)
	set(q, "group", f.Group)
	set(q, "state", f.State)
	if f.Paused != nil {
		q.Set("paused", strconv.FormatBool(*f.Paused))
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	set(q, "after", f.After)
	return q
}

// ExecFilter selects executions in ListExecutions; zero fields do not filter.
type ExecFilter struct {
	State protocol.State
	JobID string
	Agent string
	// From and To, when set, bound the scheduled time: From ≤ scheduled_at < To.
	From, To time.Time
	// Limit is the page size (the server's default when 0).
	Limit int
	// After is the Next cursor of the previous page.
	After string
}

func (f ExecFilter) values() url.Values {
	q := url.Values{}
	set(q, "state", string(f.State))
	set(q, "job", f.JobID)
	set(q, "agent", f.Agent)
	if !f.From.IsZero() {
		q.Set("from", f.From.UTC().Format(time.RFC3339Nano))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	set(q, "after", f.After)
	return q
}

func set(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func jobPath(id string) string  { return "/v1/jobs/" + url.PathEscape(id) }
func execPath(id string) string { return "/v1/executions/" + url.PathEscape(id) }

// CreateJob creates a job. A taken idempotency key gives an *APIError
// matching ErrExists whose ID is the existing job.
func (c *Client) CreateJob(ctx context.Context, j protocol.Job) (protocol.Job, error) {
	var out protocol.Job
	err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, j, &out)
	return out, err
}

// BatchResult is one job's outcome in CreateJobs: the created job, or
// the *APIError POST /v1/jobs would have answered for it (its Field
// prefixed with jobs[i]; ErrExists with the existing job's ID for a taken
// idempotency key).
type BatchResult struct {
	Job protocol.Job
	Err error
}

// CreateJobs creates up to apiv1.MaxBatchJobs (1000) jobs in one request (POST
// /v1/jobs:batch), each on its own: one result per job, in order. The
// error is for the request as a whole (not a batch, too many jobs, the
// controller not reachable); then nothing was created.
func (c *Client) CreateJobs(ctx context.Context, jobs []protocol.Job) ([]BatchResult, error) {
	var out apiv1.JobBatchResult
	if err := c.do(ctx, http.MethodPost, "/v1/jobs:batch", nil, map[string]any{"jobs": jobs}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(jobs) {
		return nil, fmt.Errorf("POST /v1/jobs:batch: %d results for %d jobs", len(out.Results), len(jobs))
	}
	res := make([]BatchResult, len(jobs))
	for i, r := range out.Results {
		switch {
		case r.Error != nil:
			res[i].Err = &APIError{Status: r.Status, Code: r.Error.Code, Message: r.Error.Message, Field: r.Error.Field, ID: r.Error.ID}
		case r.Job != nil:
			res[i].Job = *r.Job
		default:
			res[i].Err = fmt.Errorf("POST /v1/jobs:batch: result %d has neither a job nor an error", i)
		}
	}
	return res, nil
}

// GetJob returns one job.
func (c *Client) GetJob(ctx context.Context, id string) (protocol.Job, error) {
	var out protocol.Job
	err := c.do(ctx, http.MethodGet, jobPath(id), nil, nil, &out)
	return out, err
}

// ListJobs returns one page of jobs and the cursor of the next page ("" at the end).
func (c *Client) ListJobs(ctx context.Context, f JobFilter) ([]protocol.Job, string, error) {
	var out apiv1.JobList
	err := c.do(ctx, http.MethodGet, "/v1/jobs", f.values(), nil, &out)
	return out.Jobs, out.Next, err
}

// AllJobs follows the pages of ListJobs until the end, or until max jobs
// are read when max > 0.
func (c *Client) AllJobs(ctx context.Context, f JobFilter, max int) ([]protocol.Job, error) {
	return allPages(f.After, max, func(after string) ([]protocol.Job, string, error) {
		f.After = after
		return c.ListJobs(ctx, f)
	})
}

// allPages calls list with the cursor of each next page until the end (an
// empty or repeated cursor), or until max items are read when max > 0.
func allPages[T any](after string, max int, list func(after string) ([]T, string, error)) ([]T, error) {
	var all []T
	for {
		page, next, err := list(after)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if max > 0 && len(all) >= max {
			return all[:max], nil
		}
		if next == "" || next == after {
			return all, nil
		}
		after = next
	}
}

// UpdateJob replaces the spec of job id.
func (c *Client) UpdateJob(ctx context.Context, id string, j protocol.Job) (protocol.Job, error) {
	var out protocol.Job
	err := c.do(ctx, http.MethodPut, jobPath(id), nil, j, &out)
	return out, err
}

// DeleteJob deletes job id.
func (c *Client) DeleteJob(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, jobPath(id), nil, nil, nil)
}

// PauseJob pauses job id.
func (c *Client) PauseJob(ctx context.Context, id string) (protocol.Job, error) {
	var out protocol.Job
	err := c.do(ctx, http.MethodPost, jobPath(id)+":pause", nil, nil, &out)
	return out, err
}

// ResumeJob resumes job id.
func (c *Client) ResumeJob(ctx context.Context, id string) (protocol.Job, error) {
	var out protocol.Job
	err := c.do(ctx, http.MethodPost, jobPath(id)+":resume", nil, nil, &out)
	return out, err
}

// TriggerJob starts an execution of job id now.
func (c *Client) TriggerJob(ctx context.Context, id string) (protocol.Execution, error) {
	var out protocol.Execution
	err := c.do(ctx, http.MethodPost, jobPath(id)+":trigger", nil, nil, &out)
	return out, err
}

// GetExecution returns one execution.
func (c *Client) GetExecution(ctx context.Context, id string) (protocol.Execution, error) {
	var out protocol.Execution
	err := c.do(ctx, http.MethodGet, execPath(id), nil, nil, &out)
	return out, err
}

// ListExecutions returns one page of executions and the cursor of the next page.
func (c *Client) ListExecutions(ctx context.Context, f ExecFilter) ([]protocol.Execution, string, error) {
	var out apiv1.ExecutionList
	err := c.do(ctx, http.MethodGet, "/v1/executions", f.values(), nil, &out)
	return out.Executions, out.Next, err
}

// AllExecutions follows the pages of ListExecutions until the end, or until
// max executions are read when max > 0.
func (c *Client) AllExecutions(ctx context.Context, f ExecFilter, max int) ([]protocol.Execution, error) {
	return allPages(f.After, max, func(after string) ([]protocol.Execution, string, error) {
		f.After = after
		return c.ListExecutions(ctx, f)
	})
}

// RetryExecution starts a new attempt of execution id.
func (c *Client) RetryExecution(ctx context.Context, id string) (protocol.Execution, error) {
	var out protocol.Execution
	err := c.do(ctx, http.MethodPost, execPath(id)+":retry", nil, nil, &out)
	return out, err
}

// CancelExecution cancels execution id.
func (c *Client) CancelExecution(ctx context.Context, id string) (protocol.Execution, error) {
	var out protocol.Execution
	err := c.do(ctx, http.MethodPost, execPath(id)+":cancel", nil, nil, &out)
	return out, err
}

// AgentFilter selects agents in ListAgentPage; zero fields do not filter.
type AgentFilter = apiv1.AgentFilter

// AgentCounts counts the agents matching a filter (all pages), by state.
type AgentCounts = apiv1.AgentCounts

// AgentPage is one page of the agents list with the counts of all that match.
type AgentPage = apiv1.AgentPage

// ListAgentPage returns one page of the agents matching f with the counts
// per state of all that match.
func (c *Client) ListAgentPage(ctx context.Context, f AgentFilter) (AgentPage, error) {
	var out AgentPage
	err := c.do(ctx, http.MethodGet, "/v1/agents", f.Values(), nil, &out)
	return out, err
}

// AllAgents follows the pages of ListAgentPage until the end, or until
// max agents are read when max > 0.
func (c *Client) AllAgents(ctx context.Context, f AgentFilter, max int) ([]protocol.AgentInfo, error) {
	return allPages(f.After, max, func(after string) ([]protocol.AgentInfo, string, error) {
		f.After = after
		p, err := c.ListAgentPage(ctx, f)
		return p.Agents, p.Next, err
	})
}

// ListAgents returns every agent the controller knows (all pages).
func (c *Client) ListAgents(ctx context.Context) ([]protocol.AgentInfo, error) {
	return c.AllAgents(ctx, AgentFilter{Limit: 1000}, 0)
}

// Ready returns nil when the controller answers /readyz with 200, an
// *APIError matching ErrNotReady otherwise.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// Healthy returns nil when the controller process answers /healthz.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}
