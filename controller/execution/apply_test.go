package execution

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Fixtures of the (state, event) table: one record per state, one event per kind.
var (
	tNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tJob = "ax-ctl-20261201120000-abcdef"
	tID  = protocol.ExecID(tJob, tNow.Add(-4*time.Hour))
)

// recordIn returns the canonical record of a row of the table: attempt 1
// on agent a1 under lease epoch 5, with the report steps its state implies,
// last changed 3 h ago. "PENDING-unplaced" is PENDING without an agent.
func recordIn(row string) *Record {
	if row == "" {
		return nil
	}
	r := &Record{Execution: protocol.Execution{ExecID: tID, JobID: tJob, Attempt: 1, Agent: "a1", Epoch: 5,
		ScheduledAt: tNow.Add(-4 * time.Hour), CreatedAt: tNow.Add(-4 * time.Hour), UpdatedAt: tNow.Add(-3 * time.Hour)}}
	t, ru, f := protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished
	switch row {
	case "PENDING-unplaced":
		r.State, r.Agent = protocol.StatePending, ""
	case "PENDING":
		r.State = protocol.StatePending
	case "TRIGGERED":
		r.State, r.Applied = protocol.StateTriggered, []protocol.ReportKind{t}
	case "RUNNING":
		r.State, r.Applied = protocol.StateRunning, []protocol.ReportKind{t, ru}
	case "SUCCESS", "FAILED", "RETRY_WAITING":
		r.State, r.Applied = protocol.State(row), []protocol.ReportKind{t, ru, f}
	case "CANCELLED":
		r.State, r.Applied = protocol.StateCancelled, []protocol.ReportKind{t}
	case "SKIPPED":
		r.State, r.Applied = protocol.StateSkipped, []protocol.ReportKind{protocol.ReportSkipped}
	default:
		panic("unknown row " + row)
	}
	for _, k := range r.Applied {
		switch k {
		case t:
			r.Path = append(r.Path, protocol.StateTriggered)
		case ru:
			r.Path = append(r.Path, protocol.StateRunning)
		default:
			r.Path = append(r.Path, r.State)
		}
	}
	if r.State == protocol.StateRetryWaiting {
		r.NextAttemptAt = tNow
	}
	return r
}

// eventFor returns the canonical event of a column for record rec: a
// report comes from a1 under epoch 5, for the record's attempt (the next
// one when it waits for a retry).
func eventFor(col string, rec *Record) Event {
	attempt := 1
	if rec != nil && rec.State == protocol.StateRetryWaiting {
		attempt = rec.Attempt + 1
	}
	rep := func(k protocol.ReportKind) Event {
		r := protocol.Report{V: protocol.Version, Agent: "a1", JobID: tJob, ExecID: tID, Attempt: attempt, Kind: k,
			ScheduledAt: tNow.Add(-4 * time.Hour), At: tNow, Epoch: 5}
		if k == protocol.ReportFinished {
			r.Outcome, r.Result = retry.OutcomeSuccess, &retry.Result{}
		}
		return Report{Report: r}
	}
	switch col {
	case "create":
		return Create{ExecID: tID, JobID: tJob, Agent: "a1", ScheduledAt: tNow, Reason: "scheduled"}
	case "triggered", "running", "finished", "interrupted", "skipped", "fenced":
		return rep(protocol.ReportKind(col))
	case "running_by_a2":
		ev := rep(protocol.ReportRunning).(Report)
		ev.Agent = "a2"
		return ev
	case "place":
		return Place{Agent: "a2"}
	case "retry_due":
		return RetryDue{Attempt: 1, GroupAny: true, Held: true, Holder: "a1", HolderEpoch: 5}
	case "operator_retry":
		return OperatorRetry{}
	case "operator_cancel":
		return OperatorCancel{}
	case "agent_lost":
		return AgentLost{NewAgent: "a2", Epoch: 6}
	case "job_deleted":
		return JobDeleted{Attempt: 1}
	case "job_deleted_unsent":
		return JobDeleted{Attempt: 1, Unsent: true}
	case "expiry":
		return Expiry{Grace: 2 * time.Hour}
	}
	panic("unknown column " + col)
}

var (
	rows = []string{"", "PENDING-unplaced", "PENDING", "TRIGGERED", "RUNNING", "SUCCESS", "FAILED", "RETRY_WAITING", "CANCELLED", "SKIPPED"}
	cols = []string{"create", "triggered", "running", "finished", "interrupted", "skipped", "fenced", "running_by_a2", "place", "retry_due",
		"operator_retry", "operator_cancel", "agent_lost", "job_deleted", "expiry", "job_deleted_unsent"}
)

// The expected answer of a cell: a state (accepted, the next record's),
// "retire" (Expiry accepted), "same" (accepted without a new record) or a
// sentinel error (refused).
const (
	P, T, R, S    = protocol.StatePending, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess
	F, W, C, K    = protocol.StateFailed, protocol.StateRetryWaiting, protocol.StateCancelled, protocol.StateSkipped
	retire, same  = "retire", "same"
	lastColumnIdx = 15
)

// want is the table written out by hand, row by row, in the order of cols.
var want = map[string][]any{
	//                  create, triggered, running, finished, interrupted, skipped, fenced, running_by_a2, place,
	//                  retry_due, operator_retry, operator_cancel, agent_lost, job_deleted, expiry, job_deleted_unsent
	// job_deleted cancels what no agent will run: RETRY_WAITING, PENDING unplaced, PENDING whose run was never sent.
	// TRIGGERED + interrupted: the attempt is lost unstarted, T → RETRY_WAITING (the agent-lost edge).
	"":                 {P, T, ErrUnknownExec, ErrUnknownExec, ErrUnknownExec, K, ErrUnknownExec, ErrUnknownExec, ErrMovedOn, ErrMovedOn, ErrNoRecord, ErrNoRecord, ErrMovedOn, ErrMovedOn, ErrNoRecord, ErrMovedOn},
	"PENDING-unplaced": {ErrExists, ErrWrongAgent, ErrWrongAgent, ErrWrongAgent, ErrWrongAgent, ErrWrongAgent, ErrWrongAgent, ErrWrongAgent, P, ErrMovedOn, ErrNotRetryable, C, ErrMovedOn, C, ErrNotExpired, C},
	"PENDING":          {ErrExists, T, ErrTransition, ErrTransition, ErrTransition, K, ErrTransition, ErrWrongAgent, ErrMovedOn, ErrMovedOn, ErrNotRetryable, C, ErrMovedOn, ErrMovedOn, ErrNotExpired, C},
	"TRIGGERED":        {ErrExists, ErrDuplicate, R, ErrTransition, W, K, W, ErrWrongAgent, ErrMovedOn, ErrMovedOn, ErrNotRetryable, C, W, ErrMovedOn, ErrNotExpired, ErrMovedOn},
	"RUNNING":          {ErrExists, ErrDuplicate, ErrDuplicate, S, W, ErrTransition, ErrTransition, ErrDuplicate, ErrMovedOn, ErrMovedOn, ErrNotRetryable, C, W, ErrMovedOn, ErrNotExpired, ErrMovedOn},
	"SUCCESS":          {ErrExists, ErrDuplicate, ErrDuplicate, ErrDuplicate, ErrTerminal, ErrTerminal, ErrTerminal, ErrDuplicate, ErrMovedOn, ErrMovedOn, ErrNotRetryable, ErrTransition, ErrMovedOn, ErrMovedOn, retire, ErrMovedOn},
	"FAILED":           {ErrExists, ErrDuplicate, ErrDuplicate, ErrDuplicate, ErrTerminal, ErrTerminal, ErrTerminal, ErrDuplicate, ErrMovedOn, ErrMovedOn, W, ErrTransition, ErrMovedOn, ErrMovedOn, retire, ErrMovedOn},
	"RETRY_WAITING":    {ErrExists, T, ErrFuture, ErrFuture, ErrFuture, ErrFuture, W, ErrWrongAgent, ErrMovedOn, W, ErrNotRetryable, C, W, C, ErrNotExpired, C},
	"CANCELLED":        {ErrExists, ErrDuplicate, ErrTerminal, ErrTerminal, ErrTerminal, ErrTerminal, ErrTerminal, ErrWrongAgent, ErrMovedOn, ErrMovedOn, ErrNotRetryable, ErrTransition, ErrMovedOn, ErrMovedOn, retire, ErrMovedOn},
	"SKIPPED":          {ErrExists, ErrTerminal, ErrTerminal, ErrTerminal, ErrTerminal, ErrDuplicate, ErrTerminal, ErrWrongAgent, ErrMovedOn, ErrMovedOn, ErrNotRetryable, ErrTransition, ErrMovedOn, ErrMovedOn, retire, ErrMovedOn},
}

func tableEnv() Env {
	return Env{Now: tNow, Policy: func() retry.Policy { return retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute} }}
}

// TestApplyEveryStateEvent applies the canonical event of every kind
// (each report step a kind of its own) to the canonical record of every
// state, and checks the answer against the table written out by hand:
// the next state of an accepted event, the sentinel of a refused one.
// Every accepted change is an edge of the transition table, and a refused
// event leaves the record untouched and gives no record.
func TestApplyEveryStateEvent(t *testing.T) {
	if len(want) != len(rows) {
		t.Fatalf("table has %d rows, want %d", len(want), len(rows))
	}
	n := 0
	for _, row := range rows {
		if len(want[row]) != len(cols) || len(cols) != lastColumnIdx+1 {
			t.Fatalf("row %q has %d cells, want %d", row, len(want[row]), len(cols))
		}
		for i, col := range cols {
			n++
			t.Run(fmt.Sprintf("%s/%s", nameOf(row), col), func(t *testing.T) {
				rec := recordIn(row)
				orig := rec.Clone()
				next, effs, err := Apply(rec, eventFor(col, rec), tableEnv())
				if !reflect.DeepEqual(rec, orig) {
					t.Fatalf("Apply changed its input record:\n got %+v\nwant %+v", rec, orig)
				}
				switch w := want[row][i].(type) {
				case error:
					var rej *Rejection
					if !errors.As(err, &rej) || !errors.Is(err, w) || rej.Detail == "" {
						t.Fatalf("err = %v, want a *Rejection of %v with a detail", err, w)
					}
					if next != nil {
						t.Fatalf("refused event gave a record %+v", next)
					}
				case protocol.State:
					if err != nil {
						t.Fatalf("refused: %v, want %s", err, w)
					}
					if next == nil || next.State != w {
						t.Fatalf("next = %+v, want state %s", next, w)
					}
					if next.Attempt < max(orig.attempt(), 1) {
						t.Fatalf("attempt went from %d to %d", orig.attempt(), next.Attempt)
					}
					for _, e := range effs {
						if tr, ok := e.(Transitioned); ok {
							if err := CheckTransition(tr.T.From, tr.T.To); err != nil {
								t.Fatalf("effect %v is not an edge: %v", tr.T, err)
							}
						}
					}
				case string: // retire
					if err != nil || next != nil || len(effs) != 1 || effs[0] != (Retire{ExecID: tID}) {
						t.Fatalf("expiry: next %+v effects %v err %v, want only Retire", next, effs, err)
					}
				}
			})
		}
	}
	if n != 10*16 {
		t.Fatalf("checked %d cells", n)
	}
}

func nameOf(row string) string {
	if row == "" {
		return "none"
	}
	return row
}

func (r *Record) attempt() int {
	if r == nil {
		return 0
	}
	return r.Attempt
}

// TestApplyEffects checks the effects the controller relies on: the run
// of a created or placed execution, the run of a retry (to the lease
// holder, the record saying first to whom), the cancel command, the retry
// timers, and a re-send on a second Create.
func TestApplyEffects(t *testing.T) {
	env := tableEnv()
	next, effs, err := Apply(nil, eventFor("create", nil), env)
	if err != nil || len(effs) != 2 || effs[1] != (SendRun{Attempt: 1, RunAt: tNow}) {
		t.Fatalf("create: %v %v", effs, err)
	}
	if _, effs, err := Apply(next, eventFor("create", nil), env); !errors.Is(err, ErrExists) || len(effs) != 1 || !effs[0].(SendRun).Resend {
		t.Fatalf("create again: %v %v, want ErrExists and the run re-sent", effs, err)
	}
	if _, effs, _ := Apply(nil, Create{ExecID: tID, JobID: tJob, ScheduledAt: tNow}, env); effs[1] != (WaitForAgent{ExecID: tID, JobID: tJob}) {
		t.Fatalf("create unplaced: %v", effs)
	}
	// A retry of a group job goes to the holder now, under its epoch.
	w := recordIn("RETRY_WAITING")
	next, effs, err = Apply(w, RetryDue{Attempt: 1, GroupAny: true, Held: true, Holder: "a3", HolderEpoch: 9}, env)
	if err != nil || next.Sent != 2 || next.Agent != "a3" || next.Epoch != 9 || effs[0] != (SendRun{Attempt: 2, RunAt: tNow}) {
		t.Fatalf("retry due: %+v %v %v", next, effs, err)
	}
	if again, effs, err := Apply(next, RetryDue{Attempt: 1, GroupAny: true, Held: true, Holder: "a3", HolderEpoch: 9}, env); err != nil || again != nil || len(effs) != 1 {
		t.Fatalf("retry due again: %+v %v %v, want no write and the run", again, effs, err)
	}
	// Attempt 2 was sent to a3 under epoch 9; the timer fires again (a
	// restart) after the lease moved to a4: a3 may be running attempt 2,
	// so it is not sent to a4 too. It is lost with its agent and attempt 3
	// goes to a4 after the backoff.
	moved, effs, err := Apply(next, RetryDue{Attempt: 1, GroupAny: true, Held: true, Holder: "a4", HolderEpoch: 10}, env)
	if err != nil || moved.Agent != "a4" || moved.Epoch != 10 || moved.Attempt != 2 || moved.State != protocol.StateRetryWaiting ||
		moved.Outcome != retry.OutcomeAgentLost {
		t.Fatalf("retry due after the lease moved: %+v %v, want attempt 2 lost on a3 and the execution re-pointed to a4", moved, err)
	}
	for _, e := range effs {
		if r, ok := e.(SendRun); ok {
			t.Fatalf("retry due after the lease moved sent %+v: attempt 2 would run on a3 and a4", r)
		}
	}
	if _, _, err := Apply(w, RetryDue{Attempt: 1, GroupAny: true}, env); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("retry without holder: %v", err)
	}
	if next, _, err := Apply(w, RetryDue{Attempt: 1}, env); err != nil || next.Epoch != 0 || next.Agent != "a1" {
		t.Fatalf("retry of a job no longer a group job: %+v %v", next, err)
	}
	// Operator cancel of a retry waiting: event, timer dropped, command.
	_, effs, _ = Apply(w, OperatorCancel{}, env)
	if len(effs) != 4 || effs[1] != (CancelRetry{ExecID: tID}) || effs[2] != (ForgetWaiting{ExecID: tID}) ||
		effs[3] != (SendCancel{Agent: "a1", ExecID: tID, Attempt: 1, Reason: "cancelled by operator"}) {
		t.Fatalf("cancel: %v", effs)
	}
	// Operator retry arms the timer at once.
	_, effs, _ = Apply(recordIn("FAILED"), OperatorRetry{}, env)
	if len(effs) != 2 || effs[1] != (ScheduleRetry{ExecID: tID, JobID: tJob, Attempt: 1, At: tNow}) {
		t.Fatalf("operator retry: %v", effs)
	}
	// An agent lost with its retry not sent yet: re-pointed, timer armed.
	next, effs, _ = Apply(w, AgentLost{NewAgent: "a2", Epoch: 6}, env)
	if next.Agent != "a2" || next.Epoch != 6 || next.Attempt != 1 || len(effs) != 1 {
		t.Fatalf("agent lost, retry not sent: %+v %v", next, effs)
	}
	// ... with its retry sent: that attempt is lost, the next one waits.
	sent := w.Clone()
	sent.Sent = 2
	next, effs, _ = Apply(sent, AgentLost{NewAgent: "a2", Epoch: 6}, env)
	// The attempt sent is lost: a RETRY_WAITING → RETRY_WAITING transition
	// (its event carries the new next_attempt_at), then the retry timer.
	if next.Attempt != 2 || next.State != W || next.Outcome != retry.OutcomeAgentLost || len(effs) != 2 {
		t.Fatalf("agent lost, retry sent: %+v %v", next, effs)
	}
	if tr, ok := effs[0].(Transitioned); !ok || tr.T != (Transition{From: W, To: W, Reason: "agent_lost"}) || tr.Snapshot.NextAttemptAt != next.NextAttemptAt {
		t.Fatalf("agent lost, retry sent: first effect %+v, want the W → W transition of agent_lost", effs[0])
	}
	if sr, ok := effs[1].(ScheduleRetry); !ok || sr.Attempt != 2 || !sr.At.Equal(next.NextAttemptAt) || !next.NextAttemptAt.After(env.Now) {
		t.Fatalf("agent lost, retry sent: second effect %+v, want the retry of attempt 2 after now", effs[1])
	}
	// A running attempt on the new holder is left alone.
	run := recordIn("RUNNING")
	if _, _, err := Apply(run, AgentLost{NewAgent: "a1", Epoch: 6}, env); !errors.Is(err, ErrMovedOn) {
		t.Fatalf("agent lost on the same holder: %v", err)
	}
	if _, _, err := Apply(run, nil, env); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil event: %v", err)
	}
}

// TestRecordJSONCompatible: a record stored before the package existed
// (controller.execRecord) decodes to the same fields and encodes back to
// the same bytes.
func TestRecordJSONCompatible(t *testing.T) {
	stored := `{"exec_id":"` + tID + `","job_id":"` + tJob + `","attempt":2,"state":"RETRY_WAITING","agent":"a1",` +
		`"scheduled_at":"2026-12-01T08:00:00Z","created_at":"2026-12-01T08:00:00Z","updated_at":"2026-12-01T09:00:00Z",` +
		`"epoch":5,"applied":["triggered","running","finished"],"path":["TRIGGERED","RUNNING","RETRY_WAITING"],"from":"RETRY_WAITING","sent":3}`
	r, err := Decode([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempt != 2 || r.State != W || r.Sent != 3 || r.From != W || len(r.Applied) != 3 || r.Path[2] != W || r.Epoch != 5 {
		t.Fatalf("decoded %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got, orig map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stored), &orig); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orig) {
		t.Fatalf("re-encoded\n%s\nstored\n%s", b, stored)
	}
	if _, err := Decode([]byte("{")); err == nil {
		t.Fatal("bad JSON decoded")
	}
}

// TestFinishedReadsPolicyOnlyToDecide: a finished report that succeeded
// or was cancelled applies without the retry policy (the controller reads
// the job for it); a failure reads it once and follows it.
func TestFinishedReadsPolicyOnlyToDecide(t *testing.T) {
	for _, tc := range []struct {
		outcome   retry.Outcome
		retryable bool
		reads     int
		want      protocol.State
	}{
		{retry.OutcomeSuccess, false, 0, protocol.StateSuccess},
		{retry.OutcomeCancelled, false, 0, protocol.StateCancelled},
		{retry.OutcomeFailure, true, 1, protocol.StateRetryWaiting},
		{retry.OutcomeFailure, false, 1, protocol.StateFailed},
	} {
		reads := 0
		env := tableEnv()
		env.Policy = func() retry.Policy {
			reads++
			return retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
		}
		ev := eventFor("finished", recordIn("RUNNING")).(Report)
		ev.Outcome, ev.Result = tc.outcome, &retry.Result{Retryable: tc.retryable}
		next, _, err := Apply(recordIn("RUNNING"), ev, env)
		if err != nil || next.State != tc.want || reads != tc.reads {
			t.Errorf("%s (retryable %v): %v, policy read %d times; want %s, %d reads", tc.outcome, tc.retryable, err, reads, tc.want, tc.reads)
		}
	}
}
