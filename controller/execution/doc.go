// Package execution is the state machine of an ax execution: the record
// stored in KV ax_execs, the transition table, and Apply, the one function
// through which every change of an execution is decided.
//
// # What it owns
//
//   - Record, the stored form of an execution (its JSON is the one stored
//     since the first release, so old records decode unchanged).
//   - The transition table (CheckTransition, TransitionCause): the set of
//     allowed (from, to) state pairs, each with its documented cause. It
//     is the single source of truth; every state change Apply makes is
//     checked against it.
//   - The events, one type per way an execution changes: Create (a
//     controller-started run), Report (an agent's report: triggered,
//     running, finished, interrupted, skipped, fenced), Place (an agent
//     found for a waiting run), RetryDue (a retry timer fired),
//     OperatorRetry, OperatorCancel, AgentLost (a group lease moved on),
//     JobDeleted (a deleted job's attempt that no agent will run: a
//     retry due, a run never placed or never sent) and Expiry (a terminal
//     execution leaving live state).
//   - The checks that make reports idempotent and safe from untrusted
//     agents: duplicate step (exec_id, attempt, kind), old attempt, old
//     lease epoch, wrong agent, attempt not sent yet. They live here only.
//
// # Shape
//
// Apply(rec, ev, env) dispatches on the event's type to one applyX per
// kind, as hashicorp/nomad's fsm.go does per message type. It returns the
// next record (a copy; rec is never changed), the effects to execute once
// that record is stored, and an error: a *Rejection wrapping one of the
// sentinel errors of errors.go, with a detail and, for a report ahead of
// its record, Early. On a refusal nothing may be written; the effects are
// then only re-sends of what the event did when first accepted (a
// duplicate report's events, the run of an existing PENDING execution).
//
// Effects are values (Transitioned, ReplayEvent, ScheduleRetry,
// CancelRetry, SendRun, SendCancel, WaitForAgent, ForgetWaiting, Retire);
// the controller executes them after its compare-and-set write of the
// record succeeded. The Transitioned effects of one Apply are one change:
// the controller publishes one event for them (protocol.Event.Via), and
// Record.Ends remembers where each report's steps ended, so that the
// ReplayEvents of a duplicate are grouped (ReplayEvent.End) as the events
// were.
//
// # Purity
//
// The package does no I/O, no logging and reads no clock or randomness:
// the time of a change, the job's retry policy, the jitter source and the
// check that lets a report create a record come in through Env, and what
// only the controller can know (the lease holder, the grace) comes in the
// event. So the same record and event always give the same answer, which
// the table and fuzz tests of this package rely on.
package execution
