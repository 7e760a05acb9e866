package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// transition is one state change of an execution, for events, metrics and logs.
type transition struct {
	from, to protocol.State
	reason   string
}

// applyResult is what applying one report to an execution record gives:
// the next record and its transition, or the reason it was not applied.
type applyResult struct {
	next *execRecord
	tr   transition
	// reject is the ax_reports_rejected_total reason; "" when applied.
	reject string
	// detail explains a rejection for the log.
	detail string
	// early marks a report ahead of the record (an earlier step of the
	// same execution has not arrived yet, e.g. after a redelivery): it may
	// apply later, so the consumer defers it instead of dropping it.
	early bool
}

func rejected(reason, format string, args ...any) applyResult {
	return applyResult{reject: reason, detail: fmt.Sprintf(format, args...)}
}

// applyReport is the report half of the state machine, a pure function:
// it applies report r to cur (nil when the execution has no record yet) at
// controller time now. policy is the job's retry policy (with defaults);
// rnd draws the jitter. Each report applies once: (exec_id, attempt, kind)
// already applied is a duplicate; an older attempt or epoch, or a terminal
// execution, makes it stale.
func applyReport(cur *execRecord, r protocol.Report, policy func() retry.Policy, rnd func(int64) int64, now time.Time) applyResult {
	if cur == nil {
		return applyFirst(r, now)
	}
	if r.Attempt < cur.Attempt {
		return rejected(rejectOldAttempt, "attempt %d is older than the execution's attempt %d", r.Attempt, cur.Attempt)
	}
	if r.Epoch < cur.Epoch {
		return rejected(rejectOldEpoch, "lease epoch %d is older than the execution's epoch %d", r.Epoch, cur.Epoch)
	}
	if r.Attempt == cur.Attempt && cur.hasApplied(r.Kind) {
		return rejected(rejectDuplicate, "%s of attempt %d already applied", r.Kind, r.Attempt)
	}
	if cur.State.Terminal() {
		return rejected(rejectTerminal, "execution is already %s", cur.State)
	}
	newAttempt := r.Attempt > cur.Attempt
	if newAttempt && !(cur.State == protocol.StateRetryWaiting && r.Attempt == cur.Attempt+1 && r.Kind == protocol.ReportTriggered) {
		res := rejected(rejectFuture, "%s of attempt %d while the execution is %s at attempt %d", r.Kind, r.Attempt, cur.State, cur.Attempt)
		res.early = true
		return res
	}
	next := cur.clone()
	var to protocol.State
	reason := ""
	switch r.Kind {
	case protocol.ReportTriggered:
		to = protocol.StateTriggered
		if newAttempt {
			next.Attempt = r.Attempt
			next.Applied = nil
			next.StartedAt, next.FinishedAt, next.NextAttemptAt = time.Time{}, time.Time{}, time.Time{}
			next.Outcome, next.Result, next.Lag = "", nil, 0
		}
		next.Agent, next.Epoch, next.TriggeredAt = r.Agent, r.Epoch, r.At
		if r.Shard != nil {
			s := *r.Shard
			next.Shard = &s
		}
	case protocol.ReportRunning:
		to = protocol.StateRunning
		next.StartedAt, next.Lag = r.At, r.Lag
	case protocol.ReportFinished, protocol.ReportInterrupted:
		outcome, result := r.Outcome, r.Result
		if r.Kind == protocol.ReportInterrupted {
			outcome = retry.OutcomeInterrupted
			result = &retry.Result{Message: "interrupted: " + r.Reason, Retryable: true}
		}
		var res retry.Result
		if result != nil {
			res = *result
			next.Result = &res
		}
		d := policy().Decide(r.Attempt, outcome, res, rnd)
		switch {
		case outcome == retry.OutcomeSuccess:
			to = protocol.StateSuccess
		case outcome == retry.OutcomeCancelled:
			to = protocol.StateCancelled
		case d.Retry:
			to = protocol.StateRetryWaiting
			next.NextAttemptAt = now.Add(d.Delay)
		default:
			to = protocol.StateFailed
		}
		reason = d.Reason
		next.Outcome, next.Suspect = outcome, d.Suspect
		next.FinishedAt, next.Duration = r.At, r.Duration
	case protocol.ReportSkipped:
		to = protocol.StateSkipped
		reason = r.Reason
	default:
		return rejected(rejectInvalid, "unknown report kind %q", r.Kind)
	}
	if err := CheckTransition(cur.State, to); err != nil {
		res := rejected(rejectTransition, "%s report: %v", r.Kind, err)
		var te *TransitionError
		if errors.As(err, &te) {
			res.detail = fmt.Sprintf("%s report: %s", r.Kind, te.Error())
		}
		res.early = ahead(cur.State, r.Kind)
		return res
	}
	next.State, next.UpdatedAt, next.Reason = to, now, reason
	next.Applied = append(next.Applied, r.Kind)
	return applyResult{next: next, tr: transition{from: cur.State, to: to, reason: reason}}
}

// applyFirst creates the record of an execution the controller has not
// seen: a periodic fire the agent made itself (TRIGGERED) or dropped (SKIPPED).
func applyFirst(r protocol.Report, now time.Time) applyResult {
	var to protocol.State
	switch r.Kind {
	case protocol.ReportTriggered:
		if r.Attempt != 1 {
			res := rejected(rejectUnknownExec, "triggered of attempt %d for an execution without a record", r.Attempt)
			res.early = true
			return res
		}
		to = protocol.StateTriggered
	case protocol.ReportSkipped:
		to = protocol.StateSkipped
	default:
		res := rejected(rejectUnknownExec, "%s report for an execution without a record", r.Kind)
		res.early = true
		return res
	}
	if err := CheckTransition(stateNone, to); err != nil {
		return rejected(rejectTransition, "%v", err)
	}
	next := &execRecord{Execution: protocol.Execution{
		ExecID: r.ExecID, JobID: r.JobID, Attempt: r.Attempt, State: to, Agent: r.Agent,
		ScheduledAt: r.ScheduledAt, CreatedAt: now, UpdatedAt: now, Epoch: r.Epoch,
	}, Applied: []protocol.ReportKind{r.Kind}}
	if r.Shard != nil {
		s := *r.Shard
		next.Shard = &s
	}
	if to == protocol.StateTriggered {
		next.TriggeredAt = r.At
	} else {
		next.Reason = r.Reason
	}
	return applyResult{next: next, tr: transition{from: stateNone, to: to, reason: next.Reason}}
}

// ahead reports whether a report of kind skips a step that the record in
// state s still waits for (running before triggered, finished before
// running): the missing report may still arrive.
func ahead(s protocol.State, kind protocol.ReportKind) bool {
	switch kind {
	case protocol.ReportRunning:
		return s == protocol.StatePending || s == protocol.StateRetryWaiting
	case protocol.ReportFinished, protocol.ReportInterrupted:
		return s == protocol.StatePending || s == protocol.StateRetryWaiting || s == protocol.StateTriggered
	}
	return false
}
