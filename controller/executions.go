package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/histindex"
	"github.com/axsched/ax/pkg/protocol"
)

// ExecFilter selects executions in ListExecutions. Empty fields match everything.
type ExecFilter struct {
	// State matches executions in this state.
	State protocol.State
	// JobID matches executions of this job.
	JobID string
	// Agent matches executions whose current attempt runs on this agent.
	Agent string
	// Limit bounds the page size (default 100, at most 1000).
	Limit int
	// After is the last exec id of the previous page; executions are ordered by exec id.
	After string
	// From, when set, matches executions scheduled at or after it.
	From time.Time
	// To, when set, matches executions scheduled before it.
	To time.Time
}

// GetExecution returns an execution by exec id: as stored in ax_execs
// while it is live, or as a create holds it (createheld.go: a record not
// stored yet is the newest there is, since whatever stores one stores it
// before it drops it from the hold), else from the history index (an
// execution that ended and left live state after the grace period,
// controller/retention).
func (c *Controller) GetExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if _, _, err := protocol.ParseExecID("exec_id", execID); err != nil {
		return protocol.Execution{}, fmt.Errorf("execution %q: %w", execID, ErrNotFound)
	}
	v, err := c.ex.execs().Get(ctx, execID)
	if err != nil {
		return protocol.Execution{}, err
	}
	if v.Rec != nil {
		return v.Rec.Execution, nil
	}
	if r, ok := c.ex.evHold.peekUnstored(execID); ok {
		return r.Execution, nil
	}
	// A flush under way may have taken it from the hold and not stored it
	// yet: once it is done, the record is stored.
	c.ex.evHold.waitFlush()
	if v, err = c.ex.execs().Get(ctx, execID); err != nil {
		return protocol.Execution{}, err
	} else if v.Rec != nil {
		return v.Rec.Execution, nil
	}
	e, ok, err := c.hist.idx.Get(ctx, execID)
	if err != nil {
		return protocol.Execution{}, err
	}
	if !ok {
		return protocol.Execution{}, fmt.Errorf("execution %s: %w", execID, ErrNotFound)
	}
	return e, nil
}

// ListExecutions returns one page of executions matching f, ordered by exec
// id, and the cursor of the next page ("" on the last page). It reads the
// history index (history.go), live and ended executions alike, after
// waiting (at most historyReadWait) for the index to apply every event
// stored when the call began; its cost depends on the page, not on how
// many executions the history holds.
func (c *Controller) ListExecutions(ctx context.Context, f ExecFilter) ([]protocol.Execution, string, error) {
	if err := c.ready(); err != nil {
		return nil, "", err
	}
	limit, err := pageSize(f.Limit)
	if err != nil {
		return nil, "", err
	}
	if f.State != "" && !f.State.Valid() {
		return nil, "", invalidField("state", "unknown state %q", f.State)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return nil, "", invalidField("to", "must be after from (%s), got %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	c.ex.publishHeld(ctx, true) // read your writes: a create's held PENDING event (eventhold.go)
	c.hist.catchUp(ctx)
	all, err := c.hist.idx.List(ctx, histindex.Filter{State: f.State, JobID: f.JobID, Agent: f.Agent, After: f.After,
		From: f.From, To: f.To}, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(all) > limit {
		return all[:limit], all[limit-1].ExecID, nil
	}
	return all, "", nil
}

// notLive is the error of a change to an execution without a record in
// ax_execs: ErrConflict when it left live state (it is in history, final),
// else ErrNotFound.
func (c *execService) notLive(ctx context.Context, execID string) error {
	if e, ok, err := c.hist.idx.Get(ctx, execID); err == nil && ok {
		return fmt.Errorf("execution %s: %w: it ended (%s) and left live state %s after its last change (reports.dedup_window); "+
			"its history is final: run its job again (job trigger, or create a one-shot job again)", execID, ErrConflict, e.State, c.liveGrace())
	}
	return fmt.Errorf("execution %s: %w", execID, ErrNotFound)
}

// refused is the error of an operator's change of an execution that
// execution.Apply refused: not live (ErrNotFound, or ErrConflict when it
// left live state), else ErrConflict with the state machine's reason.
func (c *execService) refused(ctx context.Context, op, execID string, err error) error {
	var rej *execution.Rejection
	switch {
	case errors.Is(err, execution.ErrNoRecord):
		return c.notLive(ctx, execID)
	case errors.As(err, &rej):
		return fmt.Errorf("%s execution %s: %w: %w", op, execID, ErrConflict, err)
	default:
		return fmt.Errorf("%s execution %s: %w", op, execID, err)
	}
}

// RetryExecution gives a FAILED execution a new attempt now: it moves to
// RETRY_WAITING (reason manual_retry) and the retry wheel sends the run
// command of attempt+1 at once. Other states are ErrConflict.
func (c *Controller) RetryExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	return c.operatorChange(ctx, execID, "retry", execution.OperatorRetry{}, "")
}

// CancelExecution cancels a non-terminal execution: it becomes CANCELLED
// and its agent gets a cancel command; later reports for it are stale.
// A terminal execution is ErrConflict.
func (c *Controller) CancelExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	return c.operatorChange(ctx, execID, "cancel", execution.OperatorCancel{},
		": state is CANCELLED but the cancel command was not sent")
}

// operatorChange applies an operator's event ev to execution execID and
// runs its effects. op names the change in errors; effFail follows the
// execution's id in the error of effects that failed once the change was
// stored.
func (c *Controller) operatorChange(ctx context.Context, execID, op string, ev execution.Event, effFail string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if _, _, err := protocol.ParseExecID("exec_id", execID); err != nil {
		return protocol.Execution{}, fmt.Errorf("execution %q: %w", execID, ErrNotFound)
	}
	ctx, mark := c.marks.Begin(ctx)
	defer mark.End()
	_, after, effs, err := c.ex.applyExec(ctx, execID, ev, execution.Env{})
	if err != nil {
		return protocol.Execution{}, c.ex.refused(ctx, op, execID, err)
	}
	if err := c.ex.execEffects(ctx, after, nil, effs); err != nil {
		return after.Execution, fmt.Errorf("%s execution %s%s: %w", op, execID, effFail, err)
	}
	return after.Execution, nil
}
