package execution

import (
	"fmt"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Apply applies event ev to rec (nil: the execution has no record) at
// env.Now and returns the record to store and the effects to execute
// after it is stored, in order.
//
//   - Accepted: err is nil. next is the new record, a copy (rec is never
//     modified); next is nil when the record stays as it is but there are
//     effects to execute (a retry sent, an expiry).
//   - Refused: err is a *Rejection wrapping one of the sentinel errors of
//     this package, and next is nil: nothing may be written. The effects
//     are then only re-sends of what the event did when it was first
//     accepted: the events of a duplicate report (ReplayEvent), the run of
//     an existing PENDING execution created again (SendRun with Resend).
func Apply(rec *Record, ev Event, env Env) (next *Record, effects []Effect, err error) {
	switch e := ev.(type) {
	case Create:
		return applyCreate(rec, e, env)
	case Report:
		return applyReport(rec, e.Report, env)
	case Place:
		return applyPlace(rec, e, env)
	case RetryDue:
		return applyRetryDue(rec, e, env)
	case OperatorRetry:
		return applyOperatorRetry(rec, env)
	case OperatorCancel:
		return applyOperatorCancel(rec, e, env)
	case AgentLost:
		return applyAgentLost(rec, e, env)
	case JobDeleted:
		return applyJobDeleted(rec, e, env)
	case Expiry:
		return applyExpiry(rec, e, env)
	default:
		return nil, nil, reject(ErrInvalid, "unknown event type %T", ev)
	}
}

// changed returns the effects of a stored transition: the transition
// itself, and the retry timer armed on entering RETRY_WAITING or dropped
// on leaving it.
func changed(snap *Record, tr Transition) []Effect {
	out := []Effect{Transitioned{Snapshot: *snap, T: tr}}
	switch {
	case tr.To == protocol.StateRetryWaiting:
		out = append(out, ScheduleRetry{ExecID: snap.ExecID, JobID: snap.JobID, Attempt: snap.Attempt, At: snap.NextAttemptAt})
	case tr.From == protocol.StateRetryWaiting:
		out = append(out, CancelRetry{ExecID: snap.ExecID})
	}
	return out
}

func transitionRefused(err error, format string, args ...any) *Rejection {
	return &Rejection{Err: err, Detail: fmt.Sprintf(format, args...) + err.Error()}
}

// applyCreate makes the PENDING record of a controller-started run.
func applyCreate(rec *Record, e Create, env Env) (*Record, []Effect, error) {
	if rec != nil {
		var eff []Effect
		if rec.State == protocol.StatePending && rec.Agent != "" {
			eff = []Effect{SendRun{Attempt: rec.Attempt, RunAt: rec.ScheduledAt, Resend: true}}
		}
		return nil, eff, reject(ErrExists, "execution %s exists (%s)", rec.ExecID, rec.State)
	}
	if e.ExecID == "" || e.JobID == "" {
		return nil, nil, reject(ErrInvalid, "create: exec_id and job_id are required")
	}
	if err := CheckTransition(StateNone, protocol.StatePending); err != nil {
		return nil, nil, &Rejection{Err: err, Detail: err.Error()}
	}
	next := &Record{Execution: protocol.Execution{
		ExecID: e.ExecID, JobID: e.JobID, Attempt: 1, State: protocol.StatePending, Agent: e.Agent,
		ScheduledAt: e.ScheduledAt, CreatedAt: env.Now, UpdatedAt: env.Now, Reason: e.Reason,
	}}
	if e.Shard != nil {
		s := *e.Shard
		next.Shard = &s
	}
	if e.Agent == "" {
		next.Reason = "no_agent"
	}
	eff := changed(next, Transition{From: StateNone, To: protocol.StatePending, Reason: next.Reason})
	if e.Agent == "" {
		eff = append(eff, WaitForAgent{ExecID: e.ExecID, JobID: e.JobID})
	} else {
		eff = append(eff, SendRun{Attempt: 1, RunAt: e.ScheduledAt})
	}
	return next, eff, nil
}

// applyPlace gives a waiting PENDING execution to an agent and sends its run.
func applyPlace(rec *Record, e Place, env Env) (*Record, []Effect, error) {
	if rec == nil {
		return nil, nil, reject(ErrMovedOn, "no record")
	}
	if rec.State != protocol.StatePending || rec.Agent != "" {
		return nil, nil, reject(ErrMovedOn, "execution is %s on agent %q", rec.State, rec.Agent)
	}
	if e.Agent == "" {
		return nil, nil, reject(ErrInvalid, "place: agent is required")
	}
	next := rec.Clone()
	next.Agent, next.Reason, next.UpdatedAt = e.Agent, "placed", env.Now
	return next, []Effect{SendRun{Attempt: next.Attempt, RunAt: next.ScheduledAt}}, nil
}

// applyRetryDue sends the next attempt of an execution still
// RETRY_WAITING after attempt e.Attempt. It stays RETRY_WAITING until the
// agent reports the new attempt triggered; the record says first which
// attempt is sent to whom (Sent, Agent, Epoch): a retry of a group job
// (epoch > 0) goes to the holder of the job's lease now, under its epoch.
func applyRetryDue(rec *Record, e RetryDue, env Env) (*Record, []Effect, error) {
	if rec == nil || rec.State != protocol.StateRetryWaiting || rec.Attempt != e.Attempt {
		return nil, nil, reject(ErrMovedOn, "retry of attempt %d no longer due", e.Attempt)
	}
	agent, epoch := rec.Agent, rec.Epoch
	if rec.Epoch > 0 {
		if e.GroupAny {
			if !e.Held {
				return nil, nil, reject(ErrNoHolder, "retry of attempt %d waits for a lease holder", e.Attempt+1)
			}
			agent, epoch = e.Holder, e.HolderEpoch
		} else {
			epoch = 0 // no longer a group job: an unfenced run on its agent
		}
	}
	if agent == "" {
		return nil, nil, reject(ErrNoAgent, "retry of attempt %d has no agent to run on", e.Attempt+1)
	}
	n := e.Attempt + 1
	if rec.Sent == n && rec.Epoch > 0 && agent != rec.Agent && epoch > rec.Epoch {
		// Attempt n went to rec.Agent already, and the job's lease has
		// moved since (the timer fired again after a restart or a
		// takeover, before the old holder's report arrived): that agent
		// may be running it. Sending n to the new holder would run one
		// attempt twice; it is the lease move's case instead: n is lost
		// with its agent, and n+1 goes to the new holder after its backoff.
		return applyAgentLost(rec, AgentLost{NewAgent: agent, Epoch: epoch}, env)
	}
	runAt := rec.NextAttemptAt
	if runAt.After(env.Now) {
		runAt = env.Now
	}
	eff := []Effect{SendRun{Attempt: n, RunAt: runAt}}
	if rec.Sent == n && rec.Agent == agent && rec.Epoch == epoch {
		return nil, eff, nil
	}
	next := rec.Clone()
	next.Sent, next.Agent, next.Epoch = n, agent, epoch
	return next, eff, nil
}

// applyOperatorRetry gives a FAILED execution a new attempt now.
func applyOperatorRetry(rec *Record, env Env) (*Record, []Effect, error) {
	if rec == nil {
		return nil, nil, reject(ErrNoRecord, "retry")
	}
	if rec.State != protocol.StateFailed {
		return nil, nil, reject(ErrNotRetryable, "it is %s; only FAILED executions can be retried", rec.State)
	}
	if rec.Attempt >= protocol.MaxAttempt {
		return nil, nil, reject(ErrNotRetryable, "attempt %d is the last allowed", rec.Attempt)
	}
	if err := CheckTransition(rec.State, protocol.StateRetryWaiting); err != nil {
		return nil, nil, transitionRefused(err, "")
	}
	next := rec.Clone()
	next.State, next.Reason, next.NextAttemptAt, next.UpdatedAt = protocol.StateRetryWaiting, "manual_retry", env.Now, env.Now
	return next, changed(next, Transition{From: rec.State, To: protocol.StateRetryWaiting, Reason: "manual_retry"}), nil
}

// applyOperatorCancel cancels a non-terminal execution; its agent gets a
// cancel command.
func applyOperatorCancel(rec *Record, e OperatorCancel, env Env) (*Record, []Effect, error) {
	if rec == nil {
		return nil, nil, reject(ErrNoRecord, "cancel")
	}
	if err := CheckTransition(rec.State, protocol.StateCancelled); err != nil {
		return nil, nil, transitionRefused(err, "")
	}
	reason := e.Reason
	if reason == "" {
		reason = "cancelled by operator"
	}
	next := rec.Clone()
	next.State, next.Reason, next.Outcome, next.UpdatedAt = protocol.StateCancelled, reason, retry.OutcomeCancelled, env.Now
	eff := changed(next, Transition{From: rec.State, To: protocol.StateCancelled, Reason: reason})
	eff = append(eff, ForgetWaiting{ExecID: next.ExecID})
	if next.Agent != "" {
		eff = append(eff, SendCancel{Agent: next.Agent, ExecID: next.ExecID, Attempt: next.Attempt, Reason: reason})
	}
	return next, eff, nil
}

// applyAgentLost moves on an execution still open under an epoch before
// e.Epoch, whose lease went to e.NewAgent:
//
//   - TRIGGERED or RUNNING on another agent than the new holder: that
//     agent lost its lease, and with it the attempt: it ends with outcome
//     agent_lost, RETRY_WAITING on the new holder, or FAILED when the job's
//     attempts are spent. On the new holder itself it is left alone (the
//     agent still runs it and reports it finished, or fenced).
//   - RETRY_WAITING whose retry was sent under the earlier epoch (Sent):
//     the agent never runs it now (it fences runs of an epoch its job has
//     moved past), so that attempt counts as lost and the new holder runs
//     the next one — never the same attempt twice;
//   - RETRY_WAITING not sent yet: pointed at the new holder and epoch.
//
// Only executions fired under a lease (epoch > 0) move.
func applyAgentLost(rec *Record, e AgentLost, env Env) (*Record, []Effect, error) {
	if rec == nil || rec.Epoch == 0 || rec.Epoch >= e.Epoch || rec.State.Terminal() {
		return nil, nil, reject(ErrMovedOn, "not open under an earlier epoch")
	}
	lostAttempt := rec.Attempt
	switch {
	case rec.State == protocol.StateTriggered || rec.State == protocol.StateRunning:
		if rec.Agent == e.NewAgent {
			return nil, nil, reject(ErrMovedOn, "on the new holder %s already", e.NewAgent)
		}
	case rec.State == protocol.StateRetryWaiting && rec.Sent == rec.Attempt+1:
		lostAttempt = rec.Attempt + 1
	case rec.State == protocol.StateRetryWaiting:
		lostAttempt = 0 // not sent yet: only re-pointed
	default:
		return nil, nil, reject(ErrMovedOn, "%s is not moved by a lost lease", rec.State)
	}
	next := rec.Clone()
	var tr *Transition
	if lostAttempt > 0 {
		d := env.policy().Decide(lostAttempt, retry.OutcomeAgentLost, retry.Result{Retryable: true}, env.Rand)
		to := protocol.StateFailed
		if d.Retry {
			to = protocol.StateRetryWaiting
			next.NextAttemptAt = env.Now.Add(d.Delay)
		}
		// Also RETRY_WAITING → RETRY_WAITING: the attempt already sent is
		// lost, and the record moves on to it; its event carries the new
		// next_attempt_at (without it, the history had no event of the
		// lost attempt, and the one a restart's repair published later took
		// the time of the record's last write).
		if err := CheckTransition(rec.State, to); err != nil {
			return nil, nil, transitionRefused(err, "")
		}
		tr = &Transition{From: rec.State, To: to, Reason: d.Reason}
		next.State, next.Attempt, next.Reason, next.Outcome, next.Suspect = to, lostAttempt, d.Reason, retry.OutcomeAgentLost, d.Suspect
		next.FinishedAt = env.Now
		next.Result = &retry.Result{Message: "agent " + rec.Agent + " lost: its lease of the job ended", Retryable: true}
		next.Applied, next.Path, next.Ends = nil, nil, 0
	}
	next.Agent, next.Epoch = e.NewAgent, e.Epoch
	var eff []Effect
	if tr != nil {
		next.UpdatedAt = env.Now
		eff = changed(next, *tr)
	}
	// A retry not sent yet is only re-pointed: no transition, so no event,
	// and UpdatedAt stays the time of the RETRY_WAITING it is in (as
	// applyRetryDue's re-point). The events a duplicate report of the
	// attempt before re-publishes (replay) are snapshots of this record:
	// with the re-point's time their at would no longer be the
	// transition's, and next_attempt_at − at no longer the backoff.

	if next.State == protocol.StateRetryWaiting && (tr == nil || tr.To != protocol.StateRetryWaiting) {
		eff = append(eff, ScheduleRetry{ExecID: next.ExecID, JobID: next.JobID, Attempt: next.Attempt, At: next.NextAttemptAt})
	}
	return next, eff, nil
}

// applyJobDeleted cancels an execution whose job is gone and that no
// agent will run: RETRY_WAITING, or PENDING without a run out (unplaced,
// or e.Unsent).
func applyJobDeleted(rec *Record, e JobDeleted, env Env) (*Record, []Effect, error) {
	if rec == nil || rec.Attempt != e.Attempt {
		return nil, nil, reject(ErrMovedOn, "attempt %d no longer waits", e.Attempt)
	}
	switch {
	case rec.State == protocol.StateRetryWaiting:
	case rec.State == protocol.StatePending && (rec.Agent == "" || e.Unsent):
	case rec.State == protocol.StatePending:
		return nil, nil, reject(ErrMovedOn, "the run of attempt %d may be on agent %s", e.Attempt, rec.Agent)
	default:
		return nil, nil, reject(ErrMovedOn, "attempt %d is %s", e.Attempt, rec.State)
	}
	if err := CheckTransition(rec.State, protocol.StateCancelled); err != nil {
		return nil, nil, transitionRefused(err, "")
	}
	next := rec.Clone()
	next.State, next.Reason, next.UpdatedAt = protocol.StateCancelled, "job_deleted", env.Now
	return next, changed(next, Transition{From: rec.State, To: protocol.StateCancelled, Reason: "job_deleted"}), nil
}

// applyExpiry lets a terminal execution that ended e.Grace or longer ago
// leave live state.
func applyExpiry(rec *Record, e Expiry, env Env) (*Record, []Effect, error) {
	if rec == nil {
		return nil, nil, reject(ErrNoRecord, "expiry")
	}
	if !rec.State.Terminal() {
		return nil, nil, reject(ErrNotExpired, "execution is %s", rec.State)
	}
	if age := env.Now.Sub(rec.UpdatedAt); age < e.Grace {
		return nil, nil, reject(ErrNotExpired, "ended %s ago, grace is %s", age, e.Grace)
	}
	return nil, []Effect{Retire{ExecID: rec.ExecID}}, nil
}
