package controller

import (
	"context"
	"errors"

	"github.com/axsched/ax/controller/execution"
)

// cancelDeletedJobRun cancels PENDING execution execID of job jobID when
// the job is deleted and no agent holds the run: the execution waits for
// an agent (unplaced), or unsent says that AX_CMD holds no run of it (a
// run lost in a crash). Nothing else would ever end such an execution: it
// would stay PENDING, and in live state, for good. A job only missing
// from this replica's cache is left alone: ax_jobs must show the delete.
// It reports whether the execution was cancelled. The placement asks for
// it (placement.Host) for the unplaced ones, with the assign lock held.
func (c *execService) cancelDeletedJobRun(ctx context.Context, execID, jobID string, unsent bool) (bool, error) {
	if !c.jobsvc.jobDeleted(ctx, jobID) {
		return false, nil
	}
	v, err := c.ex.readExec(ctx, execID)
	if err != nil || v.Rec == nil {
		return false, err
	}
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	_, after, effs, err := c.ex.applyExec(ctx, execID, execution.JobDeleted{Attempt: v.Rec.Attempt, Unsent: unsent}, execution.Env{})
	if errors.Is(err, execution.ErrMovedOn) || after == nil && err == nil {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := c.ex.execEffects(ctx, after, nil, effs); err != nil {
		return true, err
	}
	c.log.Info("execution of a deleted job cancelled", "exec", execID, "job", jobID, "run_unsent", unsent)
	return true, nil
}
