package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// transition is one state change of an execution, for events, metrics and logs.
type transition struct {
	from, to protocol.State
	reason   string
}

// step is one applied transition with the record as it was right after it
// (a shallow copy: for the event, metrics and log line of that step).
type step struct {
	rec execRecord
	tr  transition
}

// applyResult is what applying one report to an execution record gives:
// the next record and the transitions it made (one per step the report
// stands for), or the reason it was not applied.
type applyResult struct {
	next  *execRecord
	steps []step
	// reject is the ax_reports_rejected_total reason; "" when applied.
	reject string
	// detail explains a rejection for the log.
	detail string
	// early marks a report ahead of the record (an earlier step of the
	// same execution has not arrived yet, e.g. after a redelivery): it may
	// apply later, so the consumer defers it instead of dropping it.
	early bool
	// replay, on a duplicate, are the transitions the report made when it
	// was applied: their events are published again (the stream drops them
	// by Msg-Id if they were stored), which closes the gap of a controller
	// that crashed between its KV write and its events.
	replay []step
}

func rejected(reason, format string, args ...any) applyResult {
	return applyResult{reject: reason, detail: fmt.Sprintf(format, args...)}
}

// reportSteps returns the steps a report stands for, in order. An agent
// may send only the finished (or interrupted) report of an attempt with
// TriggeredAt and StartedAt set, or a running report with TriggeredAt: it
// then stands for the triggered and running steps too, at those times.
func reportSteps(r protocol.Report) []protocol.Report {
	if r.TriggeredAt.IsZero() && r.StartedAt.IsZero() {
		return []protocol.Report{r}
	}
	out := make([]protocol.Report, 0, 3)
	bare := r
	bare.Outcome, bare.Result, bare.Duration, bare.Lag, bare.Reason = "", nil, 0, 0, ""
	bare.TriggeredAt, bare.StartedAt = time.Time{}, time.Time{}
	if !r.TriggeredAt.IsZero() {
		t := bare
		t.Kind, t.At = protocol.ReportTriggered, r.TriggeredAt
		out = append(out, t)
	}
	if !r.StartedAt.IsZero() && r.Kind != protocol.ReportRunning {
		s := bare
		s.Kind, s.At, s.Lag = protocol.ReportRunning, r.StartedAt, r.Lag
		out = append(out, s)
	}
	last := r
	last.TriggeredAt, last.StartedAt = time.Time{}, time.Time{}
	return append(out, last)
}

// createCheck says whether a report may create the record of an
// execution the controller has not seen (a periodic fire the agent made):
// "" when it may, else the rejection reason and why; early when the answer
// may change (the report is then deferred like one ahead of its record).
type createCheck func() (reason, detail string, early bool)

// applyReport is the report half of the state machine, a pure function:
// it applies report r to cur (nil when the execution has no record yet) at
// controller time now. policy is the job's retry policy (with defaults);
// rnd draws the jitter; create (nil: always) authorizes a report that
// would create the record. Each report applies once: (exec_id, attempt,
// kind) already applied is a duplicate; an older attempt or epoch, or a
// terminal execution, makes it stale. An attempt belongs to the agent the
// controller sent it to (or that fired it): a report of it from another
// agent is refused, and so is a new attempt the controller did not send
// to that agent. A report standing for earlier steps too (reportSteps)
// applies those of them not applied yet, all or nothing.
func applyReport(cur *execRecord, r protocol.Report, policy func() retry.Policy, rnd func(int64) int64, now time.Time, create createCheck) applyResult {
	steps := reportSteps(r)
	if cur != nil && r.Attempt == cur.Attempt && r.Epoch >= cur.Epoch && cur.hasApplied(r.Kind) {
		res := rejected(rejectDuplicate, "%s of attempt %d already applied", r.Kind, r.Attempt)
		res.replay = cur.replaySteps(steps)
		return res
	}
	rec := cur
	var out applyResult
	for _, s := range steps {
		if rec != nil && s.Attempt == rec.Attempt && rec.hasApplied(s.Kind) && s.Kind != r.Kind {
			continue // applied by an earlier report of this attempt
		}
		res := applyStep(rec, s, policy, rnd, now, create)
		if res.reject != "" {
			detail := res.detail
			if s.Kind != r.Kind {
				detail = fmt.Sprintf("%s (standing for the %s step): %s", r.Kind, s.Kind, detail)
			}
			return applyResult{reject: res.reject, detail: detail, early: res.early}
		}
		rec = res.next
		out.steps = append(out.steps, step{rec: *rec, tr: res.tr})
	}
	out.next = rec
	return out
}

// applyStep applies one step (a report standing for itself only).
func applyStep(cur *execRecord, r protocol.Report, policy func() retry.Policy, rnd func(int64) int64, now time.Time, create createCheck) stepResult {
	if cur == nil {
		res := applyFirst(r, now)
		if res.reject == "" && create != nil {
			if reason, detail, early := create(); reason != "" {
				res := stepRejected(reason, "%s", detail)
				res.early = early
				return res
			}
		}
		return res
	}
	if r.Attempt < cur.Attempt {
		return stepRejected(rejectOldAttempt, "attempt %d is older than the execution's attempt %d", r.Attempt, cur.Attempt)
	}
	if r.Epoch < cur.Epoch {
		return stepRejected(rejectOldEpoch, "lease epoch %d is older than the execution's epoch %d", r.Epoch, cur.Epoch)
	}
	if r.Attempt == cur.Attempt && cur.hasApplied(r.Kind) {
		return stepRejected(rejectDuplicate, "%s of attempt %d already applied", r.Kind, r.Attempt)
	}
	if cur.Agent == "" && !cur.State.Terminal() {
		return stepRejected(rejectWrongAgent, "attempt %d was not sent to any agent yet (no agent of its group)", cur.Attempt)
	}
	if r.Agent != cur.Agent && (r.Attempt == cur.Attempt || !cur.State.Terminal()) {
		// A new attempt is sent to the agent of the record (a retry of a
		// group job: to the lease holder, fireRetry), and the report of an
		// attempt comes from the agent that runs it.
		return stepRejected(rejectWrongAgent, "attempt %d belongs to agent %s, not %s", r.Attempt, cur.Agent, r.Agent)
	}
	if cur.State.Terminal() {
		return stepRejected(rejectTerminal, "execution is already %s", cur.State)
	}
	newAttempt := r.Attempt > cur.Attempt
	next1 := cur.State == protocol.StateRetryWaiting && r.Attempt == cur.Attempt+1
	if newAttempt && !(next1 && (r.Kind == protocol.ReportTriggered || r.Kind == protocol.ReportFenced)) {
		res := stepRejected(rejectFuture, "%s of attempt %d while the execution is %s at attempt %d", r.Kind, r.Attempt, cur.State, cur.Attempt)
		res.early = true
		return res
	}
	if newAttempt && cur.Sent != 0 && cur.Sent != r.Attempt {
		// Not sent (yet): the retry's run command names the attempt.
		res := stepRejected(rejectFuture, "%s of attempt %d, but the run sent to %s is attempt %d", r.Kind, r.Attempt, cur.Agent, cur.Sent)
		res.early = true
		return res
	}
	if r.Kind == protocol.ReportFenced {
		return applyFenced(cur, r, policy, rnd, now)
	}
	next := cur.clone()
	var to protocol.State
	reason := ""
	switch r.Kind {
	case protocol.ReportTriggered:
		to = protocol.StateTriggered
		if newAttempt {
			next.Attempt = r.Attempt
			next.Applied, next.Path = nil, nil
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
		pol := policy()
		d := pol.Decide(r.Attempt, outcome, res, rnd)
		switch {
		case outcome == retry.OutcomeSuccess:
			to = protocol.StateSuccess
		case outcome == retry.OutcomeCancelled:
			to = protocol.StateCancelled
		case d.Retry:
			to = protocol.StateRetryWaiting
			// The target's Retry-After, capped by retry.max, is a floor.
			next.NextAttemptAt = now.Add(max(d.Delay, min(r.RetryAfter.D(), pol.Max)))
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
		return stepRejected(rejectInvalid, "unknown report kind %q", r.Kind)
	}
	if err := CheckTransition(cur.State, to); err != nil {
		res := stepRejected(rejectTransition, "%s report: %v", r.Kind, err)
		var te *TransitionError
		if errors.As(err, &te) {
			res.detail = fmt.Sprintf("%s report: %s", r.Kind, te.Error())
		}
		res.early = ahead(cur.State, r.Kind)
		return res
	}
	if len(next.Applied) == 0 {
		next.From = cur.State
	}
	next.State, next.UpdatedAt, next.Reason = to, now, reason
	next.Applied = append(next.Applied, r.Kind)
	next.Path = append(next.Path, to)
	return stepResult{next: next, tr: transition{from: cur.State, to: to, reason: reason}}
}

// applyFenced applies a fenced report: agent r.Agent dropped attempt
// r.Attempt without running it, because the job's lease had moved on from
// the epoch it was sent or fired under. Either the retry the controller
// sent (the execution is RETRY_WAITING at the attempt before) or a fire
// still TRIGGERED (dropped before a worker took it). The attempt counts as
// lost, not run (not suspect): RETRY_WAITING again, whose retry goes to
// the job's current holder (fireRetry), or FAILED when attempts are spent.
func applyFenced(cur *execRecord, r protocol.Report, policy func() retry.Policy, rnd func(int64) int64, now time.Time) stepResult {
	newAttempt := r.Attempt > cur.Attempt
	if !newAttempt && cur.State != protocol.StateTriggered {
		return stepRejected(rejectTransition, "fenced report of attempt %d while the execution is %s: it was not dropped unrun", r.Attempt, cur.State)
	}
	if r.Epoch != cur.Epoch {
		return stepRejected(rejectOldEpoch, "fenced report under epoch %d; attempt %d is under epoch %d", r.Epoch, r.Attempt, cur.Epoch)
	}
	res := retry.Result{Message: fmt.Sprintf("fenced: agent %s dropped attempt %d unrun, its lease epoch %d had moved on", r.Agent, r.Attempt, r.Epoch),
		Retryable: true}
	if r.Reason != "" {
		res.Message += " (" + r.Reason + ")"
	}
	d := policy().Decide(r.Attempt, retry.OutcomeAgentLost, res, rnd)
	to := protocol.StateFailed
	next := cur.clone()
	if newAttempt {
		next.Attempt = r.Attempt
		next.Applied, next.Path = nil, nil
		next.TriggeredAt, next.StartedAt, next.Lag = time.Time{}, time.Time{}, 0
	}
	next.NextAttemptAt = time.Time{}
	if d.Retry {
		to = protocol.StateRetryWaiting
		next.NextAttemptAt = now.Add(d.Delay)
	}
	if err := CheckTransition(cur.State, to); err != nil {
		return stepRejected(rejectTransition, "fenced report: %v", err)
	}
	if len(next.Applied) == 0 {
		next.From = cur.State
	}
	next.Outcome, next.Result, next.Suspect, next.Duration = retry.OutcomeAgentLost, &res, false, 0
	next.FinishedAt, next.State, next.UpdatedAt, next.Reason = r.At, to, now, d.Reason
	next.Applied = append(next.Applied, r.Kind)
	next.Path = append(next.Path, to)
	return stepResult{next: next, tr: transition{from: cur.State, to: to, reason: d.Reason}}
}

// stepResult is what applying one step gives: the next record and its
// transition, or why not (as in applyResult).
type stepResult struct {
	next   *execRecord
	tr     transition
	reject string
	detail string
	early  bool
}

func stepRejected(reason, format string, args ...any) stepResult {
	return stepResult{reject: reason, detail: fmt.Sprintf(format, args...)}
}

// replaySteps returns, for a duplicate report standing for steps, the
// transitions those steps made on this record (from its markers), so that
// their events can be published again. Nil when the record does not say.
func (r *execRecord) replaySteps(steps []protocol.Report) []step {
	if len(r.Path) != len(r.Applied) {
		return nil
	}
	var out []step
	for _, s := range steps {
		i := slices.Index(r.Applied, s.Kind)
		if i < 0 {
			continue
		}
		from := r.From
		if i > 0 {
			from = r.Path[i-1]
		}
		out = append(out, step{rec: *r, tr: transition{from: from, to: r.Path[i], reason: r.Reason}})
	}
	return out
}

// applyFirst creates the record of an execution the controller has not
// seen: a periodic fire the agent made itself (TRIGGERED) or dropped (SKIPPED).
func applyFirst(r protocol.Report, now time.Time) stepResult {
	var to protocol.State
	switch r.Kind {
	case protocol.ReportTriggered:
		if r.Attempt != 1 {
			res := stepRejected(rejectUnknownExec, "triggered of attempt %d for an execution without a record", r.Attempt)
			res.early = true
			return res
		}
		to = protocol.StateTriggered
	case protocol.ReportSkipped:
		to = protocol.StateSkipped
	default:
		res := stepRejected(rejectUnknownExec, "%s report for an execution without a record", r.Kind)
		res.early = true
		return res
	}
	if err := CheckTransition(stateNone, to); err != nil {
		return stepRejected(rejectTransition, "%v", err)
	}
	next := &execRecord{Execution: protocol.Execution{
		ExecID: r.ExecID, JobID: r.JobID, Attempt: r.Attempt, State: to, Agent: r.Agent,
		ScheduledAt: r.ScheduledAt, CreatedAt: now, UpdatedAt: now, Epoch: r.Epoch,
	}, Applied: []protocol.ReportKind{r.Kind}, Path: []protocol.State{to}}
	if r.Shard != nil {
		s := *r.Shard
		next.Shard = &s
	}
	if to == protocol.StateTriggered {
		next.TriggeredAt = r.At
	} else {
		next.Reason = r.Reason
		next.SkippedCount, next.FirstScheduledAt = r.SkippedCount, r.FirstScheduledAt // coalesced fires
	}
	return stepResult{next: next, tr: transition{from: stateNone, to: to, reason: next.Reason}}
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
