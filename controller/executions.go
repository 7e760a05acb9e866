package controller

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
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
// while it is live, else from the history index (an execution that ended
// and left live state after the grace period, retention.go).
func (c *Controller) GetExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if _, _, err := protocol.ParseExecID("exec_id", execID); err != nil {
		return protocol.Execution{}, fmt.Errorf("execution %q: %w", execID, ErrNotFound)
	}
	v, err := c.readExec(ctx, execID)
	if err != nil {
		return protocol.Execution{}, err
	}
	if v.rec != nil {
		return v.rec.Execution, nil
	}
	e, ok, err := c.hist.idx.get(ctx, execID)
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
	c.hist.catchUp(ctx)
	all, err := c.hist.idx.list(ctx, f, limit+1)
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
func (c *Controller) notLive(ctx context.Context, execID string) error {
	if e, ok, err := c.hist.idx.get(ctx, execID); err == nil && ok {
		return fmt.Errorf("execution %s: %w: it ended (%s) and left live state; its history is final", execID, ErrConflict, e.State)
	}
	return fmt.Errorf("execution %s: %w", execID, ErrNotFound)
}

// RetryExecution gives a FAILED execution a new attempt now: it moves to
// RETRY_WAITING (reason manual_retry) and the retry wheel sends the run
// command of attempt+1 at once. Other states are ErrConflict.
func (c *Controller) RetryExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if _, _, err := protocol.ParseExecID("exec_id", execID); err != nil {
		return protocol.Execution{}, fmt.Errorf("execution %q: %w", execID, ErrNotFound)
	}
	_, after, err := c.mutateExec(ctx, execID, func(cur *execRecord) (*execRecord, error) {
		if cur == nil {
			return nil, c.notLive(ctx, execID)
		}
		if cur.State != protocol.StateFailed {
			return nil, fmt.Errorf("retry execution %s: %w: it is %s; only FAILED executions can be retried", execID, ErrConflict, cur.State)
		}
		if cur.Attempt >= protocol.MaxAttempt {
			return nil, fmt.Errorf("retry execution %s: %w: attempt %d is the last allowed", execID, ErrConflict, cur.Attempt)
		}
		if err := CheckTransition(cur.State, protocol.StateRetryWaiting); err != nil {
			return nil, err
		}
		now := c.now()
		cur.State, cur.Reason, cur.NextAttemptAt, cur.UpdatedAt = protocol.StateRetryWaiting, "manual_retry", now, now
		return cur, nil
	})
	if err != nil {
		return protocol.Execution{}, err
	}
	c.afterTransition(after, transition{from: protocol.StateFailed, to: protocol.StateRetryWaiting, reason: "manual_retry"})
	return after.Execution, nil
}

// CancelExecution cancels a non-terminal execution: it becomes CANCELLED
// and its agent gets a cancel command; later reports for it are stale.
// A terminal execution is ErrConflict.
func (c *Controller) CancelExecution(ctx context.Context, execID string) (protocol.Execution, error) {
	if err := c.ready(); err != nil {
		return protocol.Execution{}, err
	}
	if _, _, err := protocol.ParseExecID("exec_id", execID); err != nil {
		return protocol.Execution{}, fmt.Errorf("execution %q: %w", execID, ErrNotFound)
	}
	var from protocol.State
	_, after, err := c.mutateExec(ctx, execID, func(cur *execRecord) (*execRecord, error) {
		if cur == nil {
			return nil, c.notLive(ctx, execID)
		}
		if err := CheckTransition(cur.State, protocol.StateCancelled); err != nil {
			return nil, fmt.Errorf("cancel execution %s: %w", execID, err)
		}
		from = cur.State
		cur.State, cur.Reason, cur.Outcome, cur.UpdatedAt = protocol.StateCancelled, "cancelled by operator", retry.OutcomeCancelled, c.now()
		return cur, nil
	})
	if err != nil {
		return protocol.Execution{}, err
	}
	c.afterTransition(after, transition{from: from, to: protocol.StateCancelled, reason: after.Reason})
	c.assignMu.Lock()
	delete(c.unplaced, execID)
	c.assignMu.Unlock()
	if after.Agent != "" {
		cmd := protocol.Command{Kind: protocol.CmdCancel, Agent: after.Agent, Cancel: &protocol.Cancel{ExecID: execID, Reason: "cancelled by operator"}}
		if err := c.publishCommand(ctx, cmd, "cancel/"+execID+"/"+strconv.Itoa(after.Attempt)); err != nil {
			return after.Execution, fmt.Errorf("cancel execution %s: state is CANCELLED but the cancel command was not sent: %w", execID, err)
		}
	}
	return after.Execution, nil
}
