package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// knownJobReadTimeout bounds the read of a job this replica's cache has
// not seen.
const knownJobReadTimeout = 5 * time.Second

// seeJob makes the job cache hold job id when ax_jobs does: when the
// cache has not seen the job at all (neither live nor deleted), ax_jobs is
// read and the cache updated. The cache follows ax_jobs
// through a watcher, and with several replicas the job may have been
// written by another one that the watcher has not caught up with: a
// replica cut off from NATS for a few seconds, frozen, or just started. A
// decision that reads the job (the retry policy of a failed attempt,
// whether a retry's job still exists) must not take a job it has not seen
// yet for a job without a retry policy, or for a deleted one: it failed
// executions with attempts left ("attempts_exhausted") under
// TestFaultInjectionReplicas. A job ax_jobs does not hold (deleted, or
// never created) is no error and leaves the cache as it was; a read that
// failed is an error, and the caller decides later.
func (c *jobService) seeJob(ctx context.Context, id string) error {
	if c.jobs.Known(id, 0) {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, knownJobReadTimeout)
	defer cancel()
	if _, _, err := c.readJob(rctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// knownJob returns job id once the cache has seen it (seeJob); ok is
// false when the job is deleted or was never created.
func (c *jobService) knownJob(ctx context.Context, id string) (protocol.Job, bool, error) {
	if err := c.seeJob(ctx, id); err != nil {
		return protocol.Job{}, false, err
	}
	j, _, ok := c.jobs.Get(id)
	return j, ok, nil
}

// jobEnv is the Env of a change to an execution of job jobID (envOf),
// once the cache has seen the job (seeJob). An error is a read of a job
// the cache had not seen that failed: nothing may be decided from the
// defaults then.
func (c *execService) jobEnv(ctx context.Context, jobID string) (execution.Env, error) {
	if err := c.jobsvc.seeJob(ctx, jobID); err != nil {
		return execution.Env{}, err
	}
	return c.envOf(jobID), nil
}

// envOf is the Env of a change to an execution of job jobID, whose job
// the cache has seen: its retry policy (read from the cache only when a
// decision needs it; defaults when the job is deleted or never existed)
// and the jitter source. Now is set by applyExec or the caller.
func (c *execService) envOf(jobID string) execution.Env {
	return execution.Env{
		Now: c.now(),
		Policy: func() retry.Policy {
			if j, _, ok := c.jobs.Get(jobID); ok {
				return j.Retry.Policy().WithDefaults()
			}
			return retry.DefaultPolicy()
		},
		Rand: rand.Int64N,
	}
}
