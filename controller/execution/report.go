package execution

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// ReportSteps returns the steps a report stands for, in order. An agent
// may send only the finished (or interrupted) report of an attempt with
// TriggeredAt and StartedAt set, or a running report with TriggeredAt: it
// then stands for the triggered and running steps too, at those times.
func ReportSteps(r protocol.Report) []protocol.Report {
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
		if s.Lag == 0 {
			// Agents built before 2026-12-04 send the lag on running
			// reports only, so a finished report standing for its running
			// step (the running one superseded in the outbox: the usual
			// case under load) said 0. It is how late the attempt started.
			s.Lag = protocol.Duration(max(r.StartedAt.Sub(r.ScheduledAt), 0))
		}
		out = append(out, s)
	}
	last := r
	last.TriggeredAt, last.StartedAt = time.Time{}, time.Time{}
	return append(out, last)
}

// applyReport applies report r to cur. Each report applies once:
// (exec_id, attempt, kind) already applied is a duplicate; an older
// attempt or epoch, or a terminal execution, makes it stale. An attempt
// belongs to the agent the controller sent it to (or that fired it): a
// report of it from another agent is refused, and so is a new attempt the
// controller did not send to that agent. A report standing for earlier
// steps too applies those of them not applied yet, all or nothing.
func applyReport(cur *Record, r protocol.Report, env Env) (*Record, []Effect, error) {
	steps := ReportSteps(r)
	if cur != nil && r.Attempt == cur.Attempt && r.Epoch >= cur.Epoch && cur.HasApplied(r.Kind) {
		return nil, cur.replay(steps), reject(ErrDuplicate, "%s of attempt %d already applied", r.Kind, r.Attempt)
	}
	rec := cur
	var eff []Effect
	applied := 0
	for _, s := range steps {
		if rec != nil && s.Attempt == rec.Attempt && rec.HasApplied(s.Kind) && s.Kind != r.Kind {
			continue // applied by an earlier report of this attempt
		}
		next, tr, err := applyStep(rec, s, env)
		if err != nil {
			if s.Kind != r.Kind {
				rj := *err // never change a Rejection AuthorizeCreate may hand out again
				rj.Detail = fmt.Sprintf("%s (standing for the %s step): %s", r.Kind, s.Kind, err.Detail)
				err = &rj
			}
			return nil, nil, err
		}
		rec = next
		eff = append(eff, changed(rec, tr)...)
		applied++
	}
	if n := len(rec.Applied); applied > 0 && n <= endsBits {
		// rec is this report's own copy. Steps before this report's in a
		// record of a version without Ends had one event each.
		if prior := n - applied; prior > 0 && rec.Ends&(1<<prior-1) == 0 {
			rec.Ends |= 1<<prior - 1
		}
		rec.Ends |= 1 << (n - 1)
	}
	return rec, eff, nil
}

// applyStep applies one step (a report standing for itself only).
func applyStep(cur *Record, r protocol.Report, env Env) (*Record, Transition, *Rejection) {
	if cur == nil {
		next, tr, rej := applyFirst(r, env.Now)
		if rej == nil && env.AuthorizeCreate != nil {
			if err := env.AuthorizeCreate(); err != nil {
				var rj *Rejection
				if errors.As(err, &rj) {
					return nil, Transition{}, rj
				}
				return nil, Transition{}, &Rejection{Err: err, Detail: err.Error()}
			}
		}
		return next, tr, rej
	}
	if r.Attempt < cur.Attempt {
		return nil, Transition{}, reject(ErrOldAttempt, "attempt %d is older than the execution's attempt %d", r.Attempt, cur.Attempt)
	}
	if r.Epoch < cur.Epoch {
		return nil, Transition{}, reject(ErrOldEpoch, "lease epoch %d is older than the execution's epoch %d", r.Epoch, cur.Epoch)
	}
	if r.Attempt == cur.Attempt && cur.HasApplied(r.Kind) {
		return nil, Transition{}, reject(ErrDuplicate, "%s of attempt %d already applied", r.Kind, r.Attempt)
	}
	if cur.Agent == "" && !cur.State.Terminal() {
		return nil, Transition{}, reject(ErrWrongAgent, "attempt %d was not sent to any agent yet (no agent of its group)", cur.Attempt)
	}
	if r.Agent != cur.Agent && (r.Attempt == cur.Attempt || !cur.State.Terminal()) {
		// A new attempt is sent to the agent of the record (a retry of a
		// group job: to the lease holder, RetryDue), and the report of an
		// attempt comes from the agent that runs it.
		return nil, Transition{}, reject(ErrWrongAgent, "attempt %d belongs to agent %s, not %s", r.Attempt, cur.Agent, r.Agent)
	}
	if cur.State.Terminal() {
		return nil, Transition{}, reject(ErrTerminal, "execution is already %s", cur.State)
	}
	if cur.State == protocol.StateRetryWaiting && r.Attempt == cur.Attempt {
		// The attempt ended (finished, lost with its agent's lease, or
		// dropped fenced): only the next one, sent by a retry, may come.
		return nil, Transition{}, reject(ErrOldAttempt, "attempt %d ended; the execution waits to send attempt %d", r.Attempt, r.Attempt+1)
	}
	newAttempt := r.Attempt > cur.Attempt
	next1 := cur.State == protocol.StateRetryWaiting && r.Attempt == cur.Attempt+1
	if newAttempt && !(next1 && (r.Kind == protocol.ReportTriggered || r.Kind == protocol.ReportFenced)) {
		rej := reject(ErrFuture, "%s of attempt %d while the execution is %s at attempt %d", r.Kind, r.Attempt, cur.State, cur.Attempt)
		rej.Early = true
		return nil, Transition{}, rej
	}
	if newAttempt && cur.Sent != 0 && cur.Sent != r.Attempt {
		// Not sent (yet): the retry's run command names the attempt.
		rej := reject(ErrFuture, "%s of attempt %d, but the run sent to %s is attempt %d", r.Kind, r.Attempt, cur.Agent, cur.Sent)
		rej.Early = true
		return nil, Transition{}, rej
	}
	if r.Kind == protocol.ReportFenced {
		return applyFenced(cur, r, env)
	}
	next := cur.Clone()
	var to protocol.State
	reason := ""
	switch r.Kind {
	case protocol.ReportTriggered:
		to = protocol.StateTriggered
		if newAttempt {
			next.Attempt = r.Attempt
			next.Applied, next.Path, next.Ends = nil, nil, 0
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
		// A success or a cancel decides nothing from the policy: the job
		// is not read for it.
		var pol retry.Policy
		if outcome != retry.OutcomeSuccess && outcome != retry.OutcomeCancelled {
			pol = env.policy()
		}
		d := pol.Decide(r.Attempt, outcome, res, env.Rand)
		switch {
		case outcome == retry.OutcomeSuccess:
			to = protocol.StateSuccess
		case outcome == retry.OutcomeCancelled:
			to = protocol.StateCancelled
		case d.Retry:
			to = protocol.StateRetryWaiting
			// The target's Retry-After, capped by retry.max, is a floor.
			next.NextAttemptAt = env.Now.Add(max(d.Delay, min(r.RetryAfter.D(), pol.Max)))
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
		return nil, Transition{}, reject(ErrInvalid, "unknown report kind %q", r.Kind)
	}
	if err := CheckTransition(cur.State, to); err != nil {
		rej := &Rejection{Err: err, Detail: fmt.Sprintf("%s report: %v", r.Kind, err), Early: ahead(cur.State, r.Kind)}
		return nil, Transition{}, rej
	}
	if len(next.Applied) == 0 {
		next.From = cur.State
	}
	next.State, next.UpdatedAt, next.Reason = to, env.Now, reason
	next.Applied = append(next.Applied, r.Kind)
	next.Path = append(next.Path, to)
	return next, Transition{From: cur.State, To: to, Reason: reason}, nil
}

// applyFenced applies a fenced report: agent r.Agent dropped attempt
// r.Attempt without running it, because the job's lease had moved on from
// the epoch it was sent or fired under. Either the retry the controller
// sent (the execution is RETRY_WAITING at the attempt before) or a fire
// still TRIGGERED (dropped before a worker took it). The attempt counts as
// lost, not run (not suspect): RETRY_WAITING again, whose retry goes to
// the job's current holder (RetryDue), or FAILED when attempts are spent.
func applyFenced(cur *Record, r protocol.Report, env Env) (*Record, Transition, *Rejection) {
	newAttempt := r.Attempt > cur.Attempt
	if !newAttempt && cur.State != protocol.StateTriggered {
		return nil, Transition{}, reject(ErrTransition, "fenced report of attempt %d while the execution is %s: it was not dropped unrun", r.Attempt, cur.State)
	}
	if r.Epoch != cur.Epoch {
		return nil, Transition{}, reject(ErrOldEpoch, "fenced report under epoch %d; attempt %d is under epoch %d", r.Epoch, r.Attempt, cur.Epoch)
	}
	res := retry.Result{Message: fmt.Sprintf("fenced: agent %s dropped attempt %d unrun, its lease epoch %d had moved on", r.Agent, r.Attempt, r.Epoch),
		Retryable: true}
	if r.Reason != "" {
		res.Message += " (" + r.Reason + ")"
	}
	d := env.policy().Decide(r.Attempt, retry.OutcomeAgentLost, res, env.Rand)
	to := protocol.StateFailed
	next := cur.Clone()
	if newAttempt {
		next.Attempt = r.Attempt
		next.Applied, next.Path, next.Ends = nil, nil, 0
		next.TriggeredAt, next.StartedAt, next.Lag = time.Time{}, time.Time{}, 0
	}
	next.NextAttemptAt = time.Time{}
	if d.Retry {
		to = protocol.StateRetryWaiting
		next.NextAttemptAt = env.Now.Add(d.Delay)
	}
	if err := CheckTransition(cur.State, to); err != nil {
		return nil, Transition{}, &Rejection{Err: err, Detail: fmt.Sprintf("fenced report: %v", err)}
	}
	if len(next.Applied) == 0 {
		next.From = cur.State
	}
	next.Outcome, next.Result, next.Suspect, next.Duration = retry.OutcomeAgentLost, &res, false, 0
	next.FinishedAt, next.State, next.UpdatedAt, next.Reason = r.At, to, env.Now, d.Reason
	next.Applied = append(next.Applied, r.Kind)
	next.Path = append(next.Path, to)
	return next, Transition{From: cur.State, To: to, Reason: d.Reason}, nil
}

// replay returns, for a duplicate report standing for steps, the
// transitions of the reports that first applied those steps (from the
// record's markers), so that their events can be published again with the
// same Msg-Ids: one per report, ending where Ends says it ended. Nil when
// the record does not say.
func (r *Record) replay(steps []protocol.Report) []Effect {
	n := len(r.Applied)
	if len(r.Path) != n || n > endsBits {
		return nil
	}
	ends := r.Ends
	if ends == 0 {
		ends = 1<<n - 1 // a record of a version that made one event per step
	}
	var out []Effect
	done := -1 // the last step replayed
	for _, s := range steps {
		i := slices.Index(r.Applied, s.Kind)
		if i <= done {
			continue // not applied, or replayed with an earlier step of its report
		}
		start, end := i, i
		for start > 0 && ends&(1<<(start-1)) == 0 {
			start--
		}
		for end < n-1 && ends&(1<<end) == 0 {
			end++
		}
		for k := start; k <= end; k++ {
			from := r.From
			if k > 0 {
				from = r.Path[k-1]
			}
			out = append(out, ReplayEvent{Snapshot: *r, T: Transition{From: from, To: r.Path[k], Reason: r.Reason}, End: k == end})
		}
		done = end
	}
	return out
}

// applyFirst creates the record of an execution the controller has not
// seen: a periodic fire the agent made itself (TRIGGERED) or dropped (SKIPPED).
func applyFirst(r protocol.Report, now time.Time) (*Record, Transition, *Rejection) {
	var to protocol.State
	switch r.Kind {
	case protocol.ReportTriggered:
		if r.Attempt != 1 {
			rej := reject(ErrUnknownExec, "triggered of attempt %d for an execution without a record", r.Attempt)
			rej.Early = true
			return nil, Transition{}, rej
		}
		to = protocol.StateTriggered
	case protocol.ReportSkipped:
		to = protocol.StateSkipped
	default:
		rej := reject(ErrUnknownExec, "%s report for an execution without a record", r.Kind)
		rej.Early = true
		return nil, Transition{}, rej
	}
	if err := CheckTransition(StateNone, to); err != nil {
		return nil, Transition{}, &Rejection{Err: err, Detail: err.Error()}
	}
	next := &Record{Execution: protocol.Execution{
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
	return next, Transition{From: StateNone, To: to, Reason: next.Reason}, nil
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
