package controller

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

var (
	ok        = retry.Result{Code: 0}
	transient = retry.Result{Code: 503, Message: "unavailable", Retryable: true}
	permanent = retry.Result{Code: 400, Message: "bad request"}
)

// TestPeriodicPinnedSuccess: a pinned every job is assigned to its agent;
// the fires the agent makes itself appear TRIGGERED and end SUCCESS.
func TestPeriodicPinnedSuccess(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	ev := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	job, err := c.CreateJob(ctx, everyJob("edge-1", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	asg := a.waitCommand("assign", isAssign(job.ID, 1))
	if asg.Assign.Shard != nil || asg.Assign.Epoch != 0 || asg.Assign.Job.Schedule.Every != "1s" {
		t.Fatalf("assign = %+v", asg.Assign)
	}
	s, err := schedule.Parse(job.Schedule, job.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	var execs []string
	at := job.CreatedAt
	for range 3 {
		at, _ = s.Next(at)
		id := protocol.ExecID(job.ID, at)
		execs = append(execs, id)
		a.runAttempt(job.ID, id, 1, at, retry.OutcomeSuccess, ok)
	}
	for _, id := range execs {
		e := waitExec(t, c, id, "SUCCESS", inState(protocol.StateSuccess))
		if e.Agent != "edge-1" || e.Attempt != 1 || e.Lag.D() != 3*time.Millisecond || e.Duration.D() != 7*time.Millisecond {
			t.Errorf("execution %+v", e)
		}
		eventually(t, 20*time.Second, "events of "+id, func() bool { return len(ev.Path(id)) == 3 })
		if p := ev.Path(id); !slices.Equal(p, []protocol.State{protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess}) {
			t.Errorf("event path %v", p)
		}
	}
	list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: job.ID, State: protocol.StateSuccess})
	if err != nil || len(list) != 3 {
		t.Fatalf("ListExecutions = %d, %v", len(list), err)
	}
	if got := testutil.MetricValue(t, c.m.executions.WithLabelValues("SUCCESS")); got != 3 {
		t.Errorf("ax_executions_total{state=SUCCESS} = %v", got)
	}
	if got := testutil.MetricValue(t, c.m.reportsApplied); got != 9 {
		t.Errorf("ax_reports_applied_total = %v", got)
	}
	if got := testutil.MetricValue(t, c.m.scheduleLag); got != 3 {
		t.Errorf("lag histogram samples = %v", got)
	}
}

// TestAsapRetriesThenSucceeds: an asap job whose handler fails twice
// (retryable) walks PENDING → TRIGGERED → RUNNING → RETRY_WAITING →
// TRIGGERED → … → SUCCESS with its policy's backoff, never retried early.
func TestAsapRetriesThenSucceeds(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	ev := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	j := asapJob("edge-1")
	j.Retry = protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(40 * time.Millisecond), Max: protocol.Duration(time.Second)}
	job, err := c.CreateJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run attempt 1", isRun("", 1)).Run
	if run.ExecID != protocol.ExecID(job.ID, job.CreatedAt) || !run.RunAt.Equal(job.CreatedAt) {
		t.Fatalf("run = %+v", run)
	}
	if e, _ := c.GetExecution(ctx, run.ExecID); e.State != protocol.StatePending && e.State != "" {
		t.Fatalf("state before reports = %s", e.State)
	}
	wantDelay := []time.Duration{40 * time.Millisecond, 80 * time.Millisecond}
	for attempt := 1; attempt <= 3; attempt++ {
		cmd := a.waitCommand("run", isRun(run.ExecID, attempt))
		if attempt > 1 {
			// Never early: the run is issued no sooner than next_attempt_at.
			evs := ev.Of(run.ExecID)
			var rw protocol.Event
			for _, e := range evs {
				if e.To == protocol.StateRetryWaiting && e.Attempt == attempt-1 {
					rw = e
				}
			}
			if got := rw.NextAttemptAt.Sub(rw.At); got != wantDelay[attempt-2] {
				t.Errorf("attempt %d: backoff %s, want %s", attempt, got, wantDelay[attempt-2])
			}
			if cmd.IssuedAt.Before(rw.NextAttemptAt) {
				t.Errorf("attempt %d run issued at %s, before next_attempt_at %s", attempt, cmd.IssuedAt, rw.NextAttemptAt)
			}
		}
		if attempt < 3 {
			a.runAttempt(job.ID, run.ExecID, attempt, run.RunAt, retry.OutcomeFailure, transient)
			waitExec(t, c, run.ExecID, "RETRY_WAITING", func(e protocol.Execution) bool {
				return e.State == protocol.StateRetryWaiting && e.Attempt == attempt
			})
		} else {
			a.runAttempt(job.ID, run.ExecID, attempt, run.RunAt, retry.OutcomeSuccess, ok)
		}
	}
	e := waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	if e.Attempt != 3 {
		t.Fatalf("attempt = %d", e.Attempt)
	}
	P, T, R, W, S := protocol.StatePending, protocol.StateTriggered, protocol.StateRunning, protocol.StateRetryWaiting, protocol.StateSuccess
	want := []protocol.State{P, T, R, W, T, R, W, T, R, S}
	eventually(t, 20*time.Second, "all events", func() bool { return len(ev.Path(run.ExecID)) == len(want) })
	if p := ev.Path(run.ExecID); !slices.Equal(p, want) {
		t.Fatalf("path %v, want %v", p, want)
	}
	if got := testutil.MetricValue(t, c.m.retriesPending); got != 0 {
		t.Errorf("ax_retries_pending = %v", got)
	}
}

// TestRetryBackoffFakeClock: long backoffs (1h, 2h) on the injected fake
// clock: the next attempt is sent only when the clock reaches it.
func TestRetryBackoffFakeClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	j := asapJob("edge-1")
	j.Retry = protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(time.Hour), Max: protocol.Duration(4 * time.Hour)}
	job, err := c.CreateJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run 1", isRun("", 1)).Run
	for _, step := range []struct {
		attempt int
		wait    time.Duration
	}{{1, time.Hour}, {2, 2 * time.Hour}} {
		failedAt := fake.Now()
		a.runAttempt(job.ID, run.ExecID, step.attempt, run.RunAt, retry.OutcomeFailure, transient)
		e := waitExec(t, c, run.ExecID, "RETRY_WAITING", func(e protocol.Execution) bool {
			return e.State == protocol.StateRetryWaiting && e.Attempt == step.attempt
		})
		if !e.NextAttemptAt.Equal(failedAt.Add(step.wait)) {
			t.Fatalf("attempt %d: next_attempt_at %s, want %s", step.attempt, e.NextAttemptAt, failedAt.Add(step.wait))
		}
		fake.Advance(step.wait - time.Second)
		if slices.ContainsFunc(a.commands(), isRun(run.ExecID, step.attempt+1)) {
			t.Fatalf("attempt %d sent a second early", step.attempt+1)
		}
		// The wheel fires at most one 10 ms tick after the deadline.
		fake.Advance(time.Second + 10*time.Millisecond)
		cmd := a.waitCommand("next run", isRun(run.ExecID, step.attempt+1))
		if cmd.IssuedAt.Before(e.NextAttemptAt) {
			t.Fatalf("issued %s before %s", cmd.IssuedAt, e.NextAttemptAt)
		}
	}
	a.runAttempt(job.ID, run.ExecID, 3, run.RunAt, retry.OutcomeSuccess, ok)
	waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
}

// TestNonRetryableFails: a non-retryable failure ends FAILED after one attempt.
func TestNonRetryableFails(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	j := asapJob("edge-1")
	j.Retry = protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(time.Millisecond), Max: protocol.Duration(time.Millisecond)}
	job, err := c.CreateJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run", isRun("", 1)).Run
	a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeFailure, permanent)
	e := waitExec(t, c, run.ExecID, "FAILED", inState(protocol.StateFailed))
	if e.Attempt != 1 || e.Reason != retry.ReasonNotRetryable || e.Suspect || e.Result == nil || e.Result.Code != 400 {
		t.Fatalf("execution %+v", e)
	}
	if slices.ContainsFunc(a.commands(), isRun(run.ExecID, 2)) {
		t.Fatal("a non-retryable failure was retried")
	}
}

// TestTimeoutSuspect: a timeout without on_timeout ends FAILED, suspect.
func TestTimeoutSuspect(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	j := asapJob("edge-1")
	j.Timeout = protocol.Duration(time.Second)
	j.Retry = protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(time.Millisecond), Max: protocol.Duration(time.Millisecond)}
	job, err := c.CreateJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run", isRun("", 1)).Run
	a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeTimeout, retry.Result{Code: -1, Message: "timeout"})
	e := waitExec(t, c, run.ExecID, "FAILED", inState(protocol.StateFailed))
	if !e.Suspect || e.Reason != retry.ReasonTimeoutSuspect || e.Outcome != retry.OutcomeTimeout {
		t.Fatalf("execution %+v", e)
	}
	if slices.ContainsFunc(a.commands(), isRun(run.ExecID, 2)) {
		t.Fatal("a timeout was retried without on_timeout")
	}
}

// TestDuplicateReportsAppliedOnce: every report published twice with
// different Msg-Ids (a de-duplication window miss) is applied once.
func TestDuplicateReportsAppliedOnce(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	ev := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	job, err := c.CreateJob(ctx, everyJob("edge-1", "1m"))
	if err != nil {
		t.Fatal(err)
	}
	at := job.CreatedAt.Add(time.Minute)
	id := protocol.ExecID(job.ID, at)
	reps := []protocol.Report{
		a.rep(job.ID, id, 1, protocol.ReportTriggered, at),
		a.rep(job.ID, id, 1, protocol.ReportRunning, at),
		finished(a.rep(job.ID, id, 1, protocol.ReportFinished, at), retry.OutcomeSuccess, ok, time.Millisecond),
	}
	for _, r := range reps {
		a.publish(r, "")
		a.publish(r, r.MsgID()+"-again")
	}
	eventually(t, 10*time.Second, "6 reports handled", func() bool { return c.m.applied.Load()+c.m.rejected.Load() == 6 })
	if c.m.applied.Load() != 3 || testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate)) != 3 {
		t.Fatalf("applied %d, duplicates %v", c.m.applied.Load(), testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate)))
	}
	waitExec(t, c, id, "SUCCESS", inState(protocol.StateSuccess))
	eventually(t, 20*time.Second, "events", func() bool { return len(ev.Path(id)) >= 3 })
	if p := ev.Path(id); len(p) != 3 {
		t.Fatalf("path %v", p)
	}
}

// TestCancelExecution: cancel sends a cancel command; later reports are stale.
func TestCancelExecution(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	job, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run", isRun("", 1)).Run
	a.publish(a.rep(job.ID, run.ExecID, 1, protocol.ReportTriggered, run.RunAt), "")
	a.publish(a.rep(job.ID, run.ExecID, 1, protocol.ReportRunning, run.RunAt), "")
	waitExec(t, c, run.ExecID, "RUNNING", inState(protocol.StateRunning))
	e, err := c.CancelExecution(ctx, run.ExecID)
	if err != nil || e.State != protocol.StateCancelled {
		t.Fatalf("cancel = %+v, %v", e, err)
	}
	a.waitCommand("cancel", func(c protocol.Command) bool { return c.Kind == protocol.CmdCancel && c.Cancel.ExecID == run.ExecID })
	before := testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectTerminal))
	a.publish(finished(a.rep(job.ID, run.ExecID, 1, protocol.ReportFinished, run.RunAt), retry.OutcomeCancelled, retry.Result{Code: -1}, time.Millisecond), "")
	eventually(t, 10*time.Second, "stale report counted", func() bool {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectTerminal)) == before+1
	})
	if _, err := c.CancelExecution(ctx, run.ExecID); !errors.Is(err, ErrConflict) {
		t.Fatalf("second cancel = %v", err)
	}
	if _, err := c.CancelExecution(ctx, protocol.ExecID(job.ID, time.Unix(1, 0))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel missing = %v", err)
	}
	if _, err := c.GetExecution(ctx, "nonsense"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get bad id = %v", err)
	}
}

// TestManualRetryAndTrigger: RetryExecution gives a FAILED execution a new
// attempt; TriggerJob makes distinct executions of a periodic job.
func TestManualRetryAndTrigger(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	job, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run", isRun("", 1)).Run
	a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeFailure, transient) // max_attempts 1
	e := waitExec(t, c, run.ExecID, "FAILED", inState(protocol.StateFailed))
	if e.Reason != retry.ReasonAttemptsExhausted {
		t.Fatalf("reason %q", e.Reason)
	}
	e, err = c.RetryExecution(ctx, run.ExecID)
	if err != nil || e.State != protocol.StateRetryWaiting {
		t.Fatalf("retry = %+v, %v", e, err)
	}
	a.waitCommand("run 2", isRun(run.ExecID, 2))
	a.runAttempt(job.ID, run.ExecID, 2, run.RunAt, retry.OutcomeSuccess, ok)
	waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	if _, err := c.RetryExecution(ctx, run.ExecID); !errors.Is(err, ErrConflict) {
		t.Fatalf("retry of SUCCESS = %v", err)
	}

	pj, err := c.CreateJob(ctx, everyJob("edge-1", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	x1, err := c.TriggerJob(ctx, pj.ID)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := c.TriggerJob(ctx, pj.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x1.ExecID == x2.ExecID || x1.State != protocol.StatePending || x1.Reason != "manual_trigger" {
		t.Fatalf("triggers %+v %+v", x1, x2)
	}
	a.waitCommand("run of trigger 2", isRun(x2.ExecID, 1))
	if _, err := c.TriggerJob(ctx, "ax-ctl-20261129120000-zzzzzz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("trigger missing = %v", err)
	}
}

// coalesced turns a finished report into one standing for its attempt's
// triggered and running steps too.
func coalesced(r protocol.Report) protocol.Report {
	r.TriggeredAt, r.StartedAt = r.At.Add(-2*time.Millisecond), r.At.Add(-time.Millisecond)
	return r
}

// TestCoalescedReports: finished reports standing for the whole attempt
// (a periodic fire never seen, a PENDING run, attempt 2 of a RETRY_WAITING
// one) are applied in one write and one event each (via the steps in
// between), every step counted; a duplicate and a stray earlier step
// change nothing.
func TestCoalescedReports(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	ev := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	P, T, R, W, S := protocol.StatePending, protocol.StateTriggered, protocol.StateRunning, protocol.StateRetryWaiting, protocol.StateSuccess

	pj, err := c.CreateJob(ctx, everyJob("edge-1", "1m"))
	if err != nil {
		t.Fatal(err)
	}
	at := pj.CreatedAt.Add(time.Minute)
	fire := protocol.ExecID(pj.ID, at)
	fin := coalesced(finished(a.rep(pj.ID, fire, 1, protocol.ReportFinished, at), retry.OutcomeSuccess, ok, time.Millisecond))
	a.publish(fin, "")
	waitExec(t, c, fire, "SUCCESS", inState(S))
	a.publish(fin, fin.MsgID()+"-again")                                          // duplicate
	a.publish(a.rep(pj.ID, fire, 1, protocol.ReportRunning, at), "stray-running") // stray earlier step
	eventually(t, 10*time.Second, "duplicate and stray rejected", func() bool {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate)) == 2
	})
	if got := c.m.applied.Load(); got != 3 {
		t.Fatalf("applied %d steps, want 3", got)
	}

	j := asapJob("edge-1")
	j.Retry = protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(20 * time.Millisecond), Max: protocol.Duration(time.Second)}
	job, err := c.CreateJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run 1", isRun("", 1)).Run
	a.publish(coalesced(finished(a.rep(job.ID, run.ExecID, 1, protocol.ReportFinished, run.RunAt), retry.OutcomeFailure, transient, time.Millisecond)), "")
	a.waitCommand("run 2", isRun(run.ExecID, 2))
	a.publish(coalesced(finished(a.rep(job.ID, run.ExecID, 2, protocol.ReportFinished, run.RunAt), retry.OutcomeSuccess, ok, time.Millisecond)), "")
	e := waitExec(t, c, run.ExecID, "SUCCESS", inState(S))
	if e.Attempt != 2 || e.TriggeredAt.IsZero() || e.StartedAt.IsZero() {
		t.Fatalf("execution %+v", e)
	}
	if rec := readRecord(t, c, run.ExecID); !slices.Equal(rec.Applied, []protocol.ReportKind{"triggered", "running", "finished"}) {
		t.Fatalf("markers %v", rec.Applied)
	}
	for id, want := range map[string][]protocol.State{
		fire:       {T, R, S},
		run.ExecID: {P, T, R, W, T, R, S},
	} {
		eventually(t, 20*time.Second, "events of "+id, func() bool { return len(ev.Path(id)) >= len(want) })
		if p := ev.Path(id); !slices.Equal(p, want) {
			t.Errorf("%s: events %v, want %v", id, p, want)
		}
	}
	if got := c.m.applied.Load(); got != 9 {
		t.Fatalf("applied %d steps, want 9", got)
	}
	// One event per report: on the state it reached, from the state
	// before it, via the steps in between, carrying the snapshot.
	type shape struct {
		from protocol.State
		via  []protocol.State
		to   protocol.State
	}
	for id, want := range map[string][]shape{
		fire:       {{"", []protocol.State{T, R}, S}},
		run.ExecID: {{P, []protocol.State{T, R}, W}, {W, []protocol.State{T, R}, S}},
	} {
		evs := ev.Of(id)
		if len(evs) > 0 && evs[0].To == P {
			// The create's PENDING event, published when the first report
			// came later than its hold (eventhold.go); dropped otherwise.
			if evs[0].From != "" || len(evs[0].Via) != 0 || evs[0].Execution == nil {
				t.Errorf("%s: PENDING event %+v", id, evs[0])
			}
			evs = evs[1:]
		}
		if len(evs) != len(want) {
			t.Errorf("%s: %d events, want %d", id, len(evs), len(want))
			continue
		}
		for i, e := range evs {
			if e.From != want[i].from || !slices.Equal(e.Via, want[i].via) || e.To != want[i].to {
				t.Errorf("%s: event %d is %s via %v to %s, want %s via %v to %s", id, i, e.From, e.Via, e.To, want[i].from, want[i].via, want[i].to)
			}
			if e.Execution == nil || e.Execution.State != e.To || e.Execution.Attempt != e.Attempt {
				t.Errorf("%s: event %d (%s, attempt %d) carries the snapshot %+v", id, i, e.To, e.Attempt, e.Execution)
			}
		}
	}
	for _, id := range []string{fire, run.ExecID} {
		jobID, _, _ := protocol.ParseExecID("exec_id", id)
		list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: jobID})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].State != S || list[0].TriggeredAt.IsZero() || list[0].StartedAt.IsZero() || list[0].Agent != "edge-1" {
			t.Errorf("history of %s: %+v", id, list)
		}
	}
}
