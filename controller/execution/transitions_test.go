package execution

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestTransitionEveryPair checks CheckTransition on every (from, to) pair
// against the diagram of docs/architecture.md (State machine) written out independently here.
func TestTransitionEveryPair(t *testing.T) {
	const (
		P = protocol.StatePending
		T = protocol.StateTriggered
		R = protocol.StateRunning
		S = protocol.StateSuccess
		F = protocol.StateFailed
		W = protocol.StateRetryWaiting
		C = protocol.StateCancelled
		K = protocol.StateSkipped
	)
	allowed := map[[2]protocol.State]bool{
		{"", P}: true, {"", T}: true, {"", K}: true,
		{P, T}: true, {P, K}: true, {P, C}: true,
		{T, R}: true, {T, C}: true,
		{T, K}: true,               // a fire not started when the agent stopped, dropped by misfire at restart
		{T, W}: true, {T, F}: true, // agent lost (group lease lapsed)
		{R, S}: true, {R, F}: true, {R, W}: true, {R, C}: true,
		{W, T}: true, {W, C}: true, {W, F}: true, // retry sent to a lost agent, attempts spent
		{W, W}: true, // the retry sent was fenced: counted, the next one waits
		{F, W}: true, // operator retry
	}
	froms := append([]protocol.State{""}, protocol.States...)
	n := 0
	for _, from := range froms {
		for _, to := range protocol.States {
			n++
			err := CheckTransition(from, to)
			if allowed[[2]protocol.State{from, to}] {
				if err != nil {
					t.Errorf("%q → %s: refused (%v), want allowed", from, to, err)
				}
				if TransitionCause(from, to) == "" {
					t.Errorf("%q → %s: allowed without a documented cause", from, to)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) {
				t.Errorf("%q → %s: got %v, want *TransitionError", from, to, err)
				continue
			}
			if te.Reason == "" || !errors.Is(err, ErrTransition) {
				t.Errorf("%q → %s: error %v lacks a reason or is not ErrTransition", from, to, err)
			}
		}
	}
	if n != 9*8 {
		t.Fatalf("checked %d pairs, want 72", n)
	}
	if err := CheckTransition("BOGUS", P); err == nil {
		t.Error("unknown from state allowed")
	}
	if err := CheckTransition(P, "BOGUS"); err == nil {
		t.Error("unknown to state allowed")
	}
	// Every terminal state except FAILED (operator retry) has no way out.
	for _, from := range protocol.States {
		if !from.Terminal() || from == F {
			continue
		}
		for _, to := range protocol.States {
			if CheckTransition(from, to) == nil {
				t.Errorf("terminal %s → %s allowed", from, to)
			}
		}
	}
}

// TestApplyReport checks the report half of the state machine, a pure
// function: which report applies to which record, and why others do not.
func TestApplyReport(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261129120000-abcdef"
	exec := protocol.ExecID(job, now)
	rep := func(kind protocol.ReportKind, attempt int) protocol.Report {
		return protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: attempt, Kind: kind, ScheduledAt: now, At: now}
	}
	fin := func(attempt int, o retry.Outcome, retryable bool) protocol.Report {
		r := rep(protocol.ReportFinished, attempt)
		r.Outcome, r.Result = o, &retry.Result{Code: 1, Retryable: retryable}
		return r
	}
	rec := func(s protocol.State, attempt int, applied ...protocol.ReportKind) *Record {
		return &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: attempt, State: s, Agent: "a1"}, Applied: applied}
	}
	// leased is rec under lease epoch 5, whose retry of attempt sent was sent.
	leased := func(s protocol.State, attempt, sent int, applied ...protocol.ReportKind) *Record {
		r := rec(s, attempt, applied...)
		r.Epoch, r.Sent = 5, sent
		return r
	}
	fenced := func(attempt int, epoch uint64) protocol.Report {
		r := rep(protocol.ReportFenced, attempt)
		r.Epoch, r.Reason = epoch, "lease_moved_on"
		return r
	}
	by := func(agent string, r protocol.Report) protocol.Report { r.Agent = agent; return r }
	unplaced := rec(protocol.StatePending, 1)
	unplaced.Agent = ""
	pol := retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
	tests := []struct {
		name    string
		cur     *Record
		r       protocol.Report
		policy  retry.Policy
		want    protocol.State
		reject  error
		suspect bool
		next    time.Duration // NextAttemptAt - now
	}{
		{name: "periodic fire creates TRIGGERED", r: rep(protocol.ReportTriggered, 1), want: protocol.StateTriggered},
		{name: "skipped fire creates SKIPPED", r: rep(protocol.ReportSkipped, 1), want: protocol.StateSkipped},
		{name: "running without record", r: rep(protocol.ReportRunning, 1), reject: ErrUnknownExec},
		{name: "triggered attempt 2 without record", r: rep(protocol.ReportTriggered, 2), reject: ErrUnknownExec},
		{name: "pending → triggered", cur: rec(protocol.StatePending, 1), r: rep(protocol.ReportTriggered, 1), want: protocol.StateTriggered},
		{name: "pending → skipped", cur: rec(protocol.StatePending, 1), r: rep(protocol.ReportSkipped, 1), want: protocol.StateSkipped},
		{name: "pending → running refused", cur: rec(protocol.StatePending, 1), r: rep(protocol.ReportRunning, 1), reject: ErrTransition},
		{name: "triggered → running", cur: rec(protocol.StateTriggered, 1, "triggered"), r: rep(protocol.ReportRunning, 1), want: protocol.StateRunning},
		{name: "triggered → skipped (not started, misfire at restart)", cur: rec(protocol.StateTriggered, 1, "triggered"), r: rep(protocol.ReportSkipped, 1), want: protocol.StateSkipped},
		{name: "triggered twice is a duplicate", cur: rec(protocol.StateTriggered, 1, "triggered"), r: rep(protocol.ReportTriggered, 1), reject: ErrDuplicate},
		{name: "finished on triggered refused", cur: rec(protocol.StateTriggered, 1, "triggered"), r: fin(1, retry.OutcomeSuccess, false), reject: ErrTransition},
		{name: "success", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeSuccess, false), want: protocol.StateSuccess},
		{name: "retryable failure", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeFailure, true), policy: pol, want: protocol.StateRetryWaiting, next: time.Second},
		{name: "second retryable failure doubles", cur: rec(protocol.StateRunning, 2, "triggered", "running"), r: fin(2, retry.OutcomeFailure, true), policy: pol, want: protocol.StateRetryWaiting, next: 2 * time.Second},
		{name: "attempts exhausted", cur: rec(protocol.StateRunning, 3, "triggered", "running"), r: fin(3, retry.OutcomeFailure, true), policy: pol, want: protocol.StateFailed},
		{name: "not retryable", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeFailure, false), policy: pol, want: protocol.StateFailed},
		{name: "timeout without on_timeout is suspect", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeTimeout, false), policy: pol, want: protocol.StateFailed, suspect: true},
		{name: "timeout with on_timeout retries", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeTimeout, false), policy: retry.Policy{MaxAttempts: 2, Base: time.Second, Max: time.Second, OnTimeout: true}, want: protocol.StateRetryWaiting, suspect: true, next: time.Second},
		{name: "interrupted retries", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: rep(protocol.ReportInterrupted, 1), policy: pol, want: protocol.StateRetryWaiting, suspect: true, next: time.Second},
		{name: "cancelled outcome", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: fin(1, retry.OutcomeCancelled, false), want: protocol.StateCancelled},
		{name: "next attempt triggered", cur: rec(protocol.StateRetryWaiting, 1, "triggered", "running", "finished"), r: rep(protocol.ReportTriggered, 2), want: protocol.StateTriggered},
		{name: "old attempt is stale", cur: rec(protocol.StateTriggered, 2, "triggered"), r: fin(1, retry.OutcomeSuccess, false), reject: ErrOldAttempt},
		{name: "report after cancel is stale", cur: rec(protocol.StateCancelled, 1, "triggered", "running"), r: fin(1, retry.OutcomeSuccess, false), reject: ErrTerminal},
		{name: "report after success is stale", cur: rec(protocol.StateSuccess, 1, "triggered", "running", "finished"), r: rep(protocol.ReportSkipped, 1), reject: ErrTerminal},
		{name: "attempt jump refused", cur: rec(protocol.StateRunning, 1, "triggered", "running"), r: rep(protocol.ReportTriggered, 3), reject: ErrFuture},
		{name: "running of next attempt before its triggered refused", cur: rec(protocol.StateRetryWaiting, 1, "triggered", "running", "finished"), r: rep(protocol.ReportRunning, 2), reject: ErrFuture},
		// An attempt belongs to the agent it was sent to.
		{name: "pending run of another agent", cur: rec(protocol.StatePending, 1), r: by("a2", rep(protocol.ReportTriggered, 1)), reject: ErrWrongAgent},
		{name: "unplaced pending run", cur: unplaced, r: rep(protocol.ReportTriggered, 1), reject: ErrWrongAgent},
		{name: "next attempt by another agent", cur: rec(protocol.StateRetryWaiting, 1, "triggered", "running", "finished"), r: by("a2", rep(protocol.ReportTriggered, 2)), reject: ErrWrongAgent},
		{name: "next attempt sent", cur: leased(protocol.StateRetryWaiting, 1, 2, "finished"), r: func() protocol.Report { r := rep(protocol.ReportTriggered, 2); r.Epoch = 5; return r }(), want: protocol.StateTriggered},
		{name: "next attempt not sent yet", cur: leased(protocol.StateRetryWaiting, 2, 2), r: func() protocol.Report { r := rep(protocol.ReportTriggered, 3); r.Epoch = 5; return r }(), reject: ErrFuture},
		// fenced: the agent dropped an attempt unrun; it counts as lost.
		{name: "fenced retry counts", cur: leased(protocol.StateRetryWaiting, 1, 2, "finished"), r: fenced(2, 5), policy: pol, want: protocol.StateRetryWaiting, next: 2 * time.Second},
		{name: "fenced retry with attempts spent", cur: leased(protocol.StateRetryWaiting, 2, 3, "finished"), r: fenced(3, 5), policy: pol, want: protocol.StateFailed},
		{name: "fenced fire counts", cur: leased(protocol.StateTriggered, 1, 0, "triggered"), r: fenced(1, 5), policy: pol, want: protocol.StateRetryWaiting, next: time.Second},
		{name: "fenced after it ran refused", cur: leased(protocol.StateRunning, 1, 0, "triggered", "running"), r: fenced(1, 5), reject: ErrTransition},
		{name: "fenced under an older epoch", cur: func() *Record { r := leased(protocol.StateRetryWaiting, 1, 2); r.Epoch = 6; return r }(), r: fenced(2, 5), reject: ErrOldEpoch},
		{name: "fenced retry re-pointed elsewhere", cur: func() *Record { r := leased(protocol.StateRetryWaiting, 1, 2); r.Agent = "a2"; return r }(), r: fenced(2, 5), reject: ErrWrongAgent},
		{name: "fenced retry not sent", cur: leased(protocol.StateRetryWaiting, 2, 2), r: fenced(3, 5), reject: ErrFuture},
		// An attempt waiting for its retry ended: only the next one may come.
		{name: "lost attempt reported by the new holder", cur: func() *Record { r := leased(protocol.StateRetryWaiting, 1, 0); r.Agent = "a2"; return r }(),
			r: func() protocol.Report { r := by("a2", rep(protocol.ReportTriggered, 1)); r.Epoch = 5; return r }(), reject: ErrOldAttempt},
		{name: "interrupted after the attempt finished", cur: rec(protocol.StateRetryWaiting, 1, "triggered", "running", "finished"), r: rep(protocol.ReportInterrupted, 1), reject: ErrOldAttempt},
	}
	earlyCases := map[string]bool{
		"running without record":                               true,
		"triggered attempt 2 without record":                   true,
		"pending → running refused":                            true,
		"finished on triggered refused":                        true,
		"attempt jump refused":                                 true,
		"running of next attempt before its triggered refused": true,
		"next attempt not sent yet":                            true,
		"fenced retry not sent":                                true,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			if p.MaxAttempts == 0 {
				p = retry.DefaultPolicy()
			}
			res := applyR(tt.cur, tt.r, func() retry.Policy { return p }, nil, now, nil)
			if res.reject != tt.reject {
				t.Fatalf("reject = %q (%s), want %q", res.reject, res.detail, tt.reject)
			}
			if wantEarly := earlyCases[tt.name]; res.early != wantEarly {
				t.Fatalf("early = %v, want %v (a report ahead of its record is deferred, others are final)", res.early, wantEarly)
			}
			if tt.reject != nil {
				if res.next != nil || res.detail == "" {
					t.Fatalf("rejected report gave a record or no detail: %+v", res)
				}
				return
			}
			if res.next.State != tt.want || len(res.steps) != 1 || res.steps[0].T.To != tt.want {
				t.Fatalf("state = %s, want %s", res.next.State, tt.want)
			}
			if tt.r.Kind == protocol.ReportFenced && (res.next.Outcome != retry.OutcomeAgentLost || res.next.Result == nil || res.next.Result.Message == "") {
				t.Errorf("fenced: outcome %q result %+v, want agent_lost with a message", res.next.Outcome, res.next.Result)
			}
			if res.next.Suspect != tt.suspect {
				t.Errorf("suspect = %v, want %v", res.next.Suspect, tt.suspect)
			}
			if got := res.next.NextAttemptAt.Sub(now); tt.next != 0 && got != tt.next {
				t.Errorf("next attempt in %s, want %s", got, tt.next)
			}
			if res.next.Attempt != tt.r.Attempt || !res.next.HasApplied(tt.r.Kind) {
				t.Errorf("attempt %d applied %v, want attempt %d with %s", res.next.Attempt, res.next.Applied, tt.r.Attempt, tt.r.Kind)
			}
			if tt.cur != nil && tt.cur.State == protocol.StateRetryWaiting && len(res.next.Applied) != 1 {
				t.Errorf("new attempt kept old markers: %v", res.next.Applied)
			}
			// Applying the same report again is a duplicate.
			again := applyR(res.next, tt.r, func() retry.Policy { return p }, nil, now, nil)
			if again.reject != ErrDuplicate && !(res.next.State.Terminal() && again.reject == ErrTerminal) {
				t.Errorf("second apply: reject %q, want duplicate", again.reject)
			}
		})
	}
}

// TestApplyReportCreateCheck: only a report that creates a record asks
// createCheck, and its refusal is final unless it says early.
func TestApplyReportCreateCheck(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261129120000-abcdef"
	exec := protocol.ExecID(job, now)
	r := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: 1, Kind: protocol.ReportTriggered, ScheduledAt: now, At: now}
	pol := func() retry.Policy { return retry.DefaultPolicy() }
	asked := 0
	check := func(reason error, early bool) func() error {
		return func() error {
			asked++
			if reason == nil {
				return nil
			}
			return &Rejection{Err: reason, Detail: "because", Early: early}
		}
	}
	if res := applyR(nil, r, pol, nil, now, check(errNotAssigned, false)); res.reject != errNotAssigned || res.early || res.next != nil {
		t.Fatalf("refused creation: %+v", res)
	}
	if res := applyR(nil, r, pol, nil, now, check(errUnknownJob, true)); res.reject != errUnknownJob || !res.early {
		t.Fatalf("creation not decided yet: %+v", res)
	}
	if res := applyR(nil, r, pol, nil, now, check(nil, false)); res.reject != nil || res.next == nil {
		t.Fatalf("allowed creation: %+v", res)
	}
	asked = 0
	cur := &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: 1, State: protocol.StatePending, Agent: "a1"}}
	if res := applyR(cur, r, pol, nil, now, check(errNotAssigned, false)); res.reject != nil || asked != 0 {
		t.Fatalf("a report of a recorded execution asked createCheck (%d) or was refused: %+v", asked, res)
	}
	run := r
	run.Kind = protocol.ReportRunning
	if res := applyR(nil, run, pol, nil, now, check(errNotAssigned, false)); res.reject != ErrUnknownExec || !res.early || asked != 0 {
		t.Fatalf("running without a record: %+v (asked %d)", res, asked)
	}
}

// TestApplyCoalescedReport: a finished (or interrupted, or running) report
// with TriggeredAt/StartedAt stands for the earlier steps of its attempt:
// they apply in one record, one transition each, once.
func TestApplyCoalescedReport(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261129120000-abcdef"
	exec := protocol.ExecID(job, now)
	tAt, sAt, fAt := now.Add(time.Millisecond), now.Add(2*time.Millisecond), now.Add(5*time.Millisecond)
	co := func(kind protocol.ReportKind, attempt int, o retry.Outcome, retryable, started bool) protocol.Report {
		r := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: attempt, Kind: kind, ScheduledAt: now,
			At: fAt, TriggeredAt: tAt, Lag: protocol.Duration(3 * time.Millisecond)}
		if started {
			r.StartedAt = sAt
		}
		if kind == protocol.ReportFinished {
			r.Outcome, r.Result, r.Duration = o, &retry.Result{Code: 1, Retryable: retryable}, protocol.Duration(3*time.Millisecond)
		}
		if kind == protocol.ReportRunning {
			r.At = sAt
		}
		return r
	}
	rec := func(s protocol.State, attempt int, applied ...protocol.ReportKind) *Record {
		r := &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: attempt, State: s, Agent: "a1"}, Applied: applied}
		for _, k := range applied {
			switch k {
			case protocol.ReportTriggered:
				r.Path = append(r.Path, protocol.StateTriggered)
			case protocol.ReportRunning:
				r.Path = append(r.Path, protocol.StateRunning)
			default:
				r.Path = append(r.Path, s)
			}
		}
		return r
	}
	pol := retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
	const (
		P, T, R = protocol.StatePending, protocol.StateTriggered, protocol.StateRunning
		S, W, C = protocol.StateSuccess, protocol.StateRetryWaiting, protocol.StateCancelled
	)
	tests := []struct {
		name    string
		cur     *Record
		r       protocol.Report
		path    []protocol.State // from of the first step, then the to of each step
		attempt int
		next    time.Duration
		reject  error
		early   bool
	}{
		{name: "periodic fire never seen", r: co(protocol.ReportFinished, 1, retry.OutcomeSuccess, false, true),
			path: []protocol.State{"", T, R, S}, attempt: 1},
		{name: "pending run command", cur: rec(P, 1), r: co(protocol.ReportFinished, 1, retry.OutcomeSuccess, false, true),
			path: []protocol.State{P, T, R, S}, attempt: 1},
		{name: "attempt n+1 of a retry waiting one", cur: rec(W, 1, "triggered", "running", "finished"),
			r: co(protocol.ReportFinished, 2, retry.OutcomeFailure, true, true), path: []protocol.State{W, T, R, W}, attempt: 2, next: 2 * time.Second},
		{name: "triggered applied alone before", cur: rec(T, 1, "triggered"), r: co(protocol.ReportFinished, 1, retry.OutcomeSuccess, false, true),
			path: []protocol.State{T, R, S}, attempt: 1},
		{name: "running standing for triggered", r: co(protocol.ReportRunning, 1, "", false, false),
			path: []protocol.State{"", T, R}, attempt: 1},
		{name: "interrupted standing for both", cur: rec(P, 1), r: func() protocol.Report {
			r := co(protocol.ReportInterrupted, 1, "", false, true)
			r.Reason = "restart"
			return r
		}(), path: []protocol.State{P, T, R, W}, attempt: 1, next: time.Second},
		{name: "cancelled before it started", cur: rec(P, 1), r: co(protocol.ReportFinished, 1, retry.OutcomeCancelled, false, false),
			path: []protocol.State{P, T, C}, attempt: 1},
		{name: "next attempt while the last still runs", cur: rec(R, 1, "triggered", "running"),
			r: co(protocol.ReportFinished, 2, retry.OutcomeSuccess, false, true), reject: ErrFuture, early: true},
		{name: "without triggered_at for an unknown execution", r: func() protocol.Report {
			r := co(protocol.ReportFinished, 1, retry.OutcomeSuccess, false, true)
			r.TriggeredAt = time.Time{}
			return r
		}(), reject: ErrUnknownExec, early: true},
		{name: "after the execution ended", cur: rec(S, 1, "triggered", "running", "finished"),
			r: co(protocol.ReportFinished, 1, retry.OutcomeSuccess, false, true), reject: ErrDuplicate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := func() retry.Policy { return pol }
			res := applyR(tt.cur, tt.r, policy, nil, now, nil)
			if res.reject != tt.reject || res.early != tt.early {
				t.Fatalf("reject = %q early %v (%s), want %q early %v", res.reject, res.early, res.detail, tt.reject, tt.early)
			}
			if tt.reject != nil {
				if res.next != nil || len(res.steps) != 0 {
					t.Fatalf("rejected report changed the record: %+v", res)
				}
				return
			}
			var got []protocol.State
			for i, st := range res.steps {
				if i == 0 {
					got = append(got, st.T.From)
				}
				got = append(got, st.T.To)
				if st.Snapshot.State != st.T.To {
					t.Errorf("step %d: snapshot state %s, transition to %s", i, st.Snapshot.State, st.T.To)
				}
			}
			if !slices.Equal(got, tt.path) {
				t.Fatalf("path %v, want %v", got, tt.path)
			}
			n := res.next
			if n.Attempt != tt.attempt || n.State != tt.path[len(tt.path)-1] {
				t.Fatalf("record at attempt %d %s", n.Attempt, n.State)
			}
			if len(n.Applied) != len(n.Path) || n.Applied[len(n.Applied)-1] != tt.r.Kind {
				t.Fatalf("markers %v %v", n.Applied, n.Path)
			}
			if (tt.cur == nil || !tt.cur.HasApplied(protocol.ReportTriggered) || tt.cur.State == W) && !n.TriggeredAt.Equal(tAt) {
				t.Errorf("triggered_at %s, want %s", n.TriggeredAt, tAt)
			}
			if !tt.r.StartedAt.IsZero() && (!n.StartedAt.Equal(sAt) || n.Lag.D() != 3*time.Millisecond) {
				t.Errorf("started_at %s lag %s, want %s 3ms", n.StartedAt, n.Lag.D(), sAt)
			}
			if got := n.NextAttemptAt.Sub(now); tt.next != 0 && got != tt.next {
				t.Errorf("next attempt in %s, want %s", got, tt.next)
			}
			// The same report again is a duplicate that replays the
			// transitions it made (for its events), changing nothing.
			again := applyR(n, tt.r, policy, nil, now, nil)
			if again.reject != ErrDuplicate || again.next != nil {
				t.Fatalf("second apply: reject %q", again.reject)
			}
			var replayed []Transition
			for _, st := range again.replay {
				replayed = append(replayed, st.T)
			}
			var want []Transition
			for _, st := range res.steps {
				want = append(want, Transition{From: st.T.From, To: st.T.To})
			}
			for i := range replayed {
				replayed[i].Reason = ""
			}
			if tt.cur == nil || len(tt.cur.Applied) == 0 || tt.cur.State == W {
				if !slices.Equal(replayed, want) {
					t.Errorf("replay %v, want %v", replayed, want)
				}
			}
			// A stray earlier step of the same attempt is stale.
			for _, k := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning} {
				if !slices.Contains(n.Applied, k) {
					continue
				}
				stray := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: tt.r.Attempt, Kind: k, ScheduledAt: now, At: now}
				if res := applyR(n, stray, policy, nil, now, nil); res.reject != ErrDuplicate || res.next != nil {
					t.Errorf("stray %s: reject %q", k, res.reject)
				}
			}
		})
	}
}
