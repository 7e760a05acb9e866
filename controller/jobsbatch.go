package controller

import (
	"context"
	"fmt"
	"sync"

	"github.com/axsched/ax/pkg/protocol"
)

// MaxBatchJobs is the most jobs one CreateJobs call takes.
const MaxBatchJobs = 1000

// batchParallel is how many creates of one batch are in flight at once:
// each create waits for its stored writes, so a batch goes about this many
// times faster than the same creates one after another, without one
// batch taking every connection to the server.
const batchParallel = 16

// JobResult is the outcome of one job of CreateJobs: the created job, or
// the error CreateJob gave for it (a *protocol.FieldError, an
// *ExistsError for a taken idempotency key, ...).
type JobResult struct {
	Job protocol.Job
	Err error
}

// CreateJobs creates each job as CreateJob does, on its own: one job's
// error (invalid, its idempotency key taken) does not stop the others, and
// an idempotency key makes a retried batch return the existing jobs as
// *ExistsError instead of twins. Results are in the order of jobs. A batch
// of more than MaxBatchJobs, or an empty one, is refused whole (a
// *protocol.FieldError on "jobs") and creates nothing.
func (c *Controller) CreateJobs(ctx context.Context, jobs []protocol.Job) ([]JobResult, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	switch {
	case len(jobs) == 0:
		return nil, invalidField("jobs", "must hold at least one job")
	case len(jobs) > MaxBatchJobs:
		return nil, &protocol.FieldError{Field: "jobs", Reason: fmt.Sprintf("holds %d jobs, at most %d allowed", len(jobs), MaxBatchJobs), Err: protocol.ErrTooLarge}
	}
	res := make([]JobResult, len(jobs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(batchParallel, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				j, err := c.CreateJob(ctx, jobs[i])
				res[i] = JobResult{Job: j, Err: err}
			}
		}()
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()
	return res, nil
}
