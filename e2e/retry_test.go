package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// flakyPayload tells the flaky handler how to fail.
type flakyPayload struct {
	// Fail is the number of first attempts that fail.
	Fail      int  `json:"fail"`
	Retryable bool `json:"retryable"`
}

// flaky fails the first Fail attempts of an execution, then succeeds.
func flaky(_ context.Context, t agent.Task) agent.Result {
	var p flakyPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return agent.Result{Code: 2, Message: "bad payload: " + err.Error()}
	}
	if t.Attempt <= p.Fail {
		return agent.Result{Code: 1, Message: "flaky failure", Retryable: p.Retryable}
	}
	return agent.Result{}
}

// TestRetryAndFailure: the controller owns retries. A retryable failure
// walks RETRY_WAITING → TRIGGERED with the policy's backoff; a
// non-retryable one and an exec timeout without on_timeout end FAILED.
func TestRetryAndFailure(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	cfg := agentConfig("edge-r", c.NATSURL(), t.TempDir(), nil)
	cfg.Exec.Allow = []string{"/bin/sleep"}
	startAgent(t, cfg, agent.WithHandler("flaky", flaky))
	waitAgentOnline(t, c, "edge-r")

	const base = 100 * time.Millisecond
	S := func(s ...protocol.State) []protocol.State { return s }
	const (
		P  = protocol.StatePending
		T  = protocol.StateTriggered
		R  = protocol.StateRunning
		RW = protocol.StateRetryWaiting
		OK = protocol.StateSuccess
		F  = protocol.StateFailed
	)
	for _, tt := range []struct {
		name     string
		handler  string
		payload  any
		timeout  time.Duration
		retry    protocol.RetrySpec
		want     []protocol.State
		attempts int
		outcome  retry.Outcome
		reason   string
		suspect  bool
	}{
		{name: "retryable-twice-then-success", handler: "flaky", payload: flakyPayload{Fail: 2, Retryable: true},
			retry: protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(base)},
			want:  S(P, T, R, RW, T, R, RW, T, R, OK), attempts: 3, outcome: retry.OutcomeSuccess, reason: retry.ReasonSucceeded},
		{name: "not-retryable", handler: "flaky", payload: flakyPayload{Fail: 5, Retryable: false},
			retry: protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(base)},
			want:  S(P, T, R, F), attempts: 1, outcome: retry.OutcomeFailure, reason: retry.ReasonNotRetryable},
		{name: "attempts-exhausted", handler: "flaky", payload: flakyPayload{Fail: 5, Retryable: true},
			retry: protocol.RetrySpec{MaxAttempts: 2, Base: protocol.Duration(base)},
			want:  S(P, T, R, RW, T, R, F), attempts: 2, outcome: retry.OutcomeFailure, reason: retry.ReasonAttemptsExhausted},
		{name: "exec-timeout-suspect", handler: "exec", payload: map[string]any{"command": "/bin/sleep", "args": []string{"30"}},
			timeout: 300 * time.Millisecond, retry: protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(base)},
			want: S(P, T, R, F), attempts: 1, outcome: retry.OutcomeTimeout, reason: retry.ReasonTimeoutSuspect, suspect: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := createJob(t, c, protocol.Job{Name: tt.name, Handler: tt.handler, Payload: mustJSON(t, tt.payload),
				Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-r"},
				Timeout: protocol.Duration(tt.timeout), Retry: tt.retry})
			es := waitExecs(t, c, j.ID, 1, "terminal", func(e protocol.Execution) bool { return e.State.Terminal() })
			e := es[0]
			if e.Attempt != tt.attempts || e.Outcome != tt.outcome || e.Reason != tt.reason || e.Suspect != tt.suspect {
				t.Errorf("execution: attempt %d outcome %q reason %q suspect %v, want %d %q %q %v (%+v)",
					e.Attempt, e.Outcome, e.Reason, e.Suspect, tt.attempts, tt.outcome, tt.reason, tt.suspect, e)
			}
			evs := ev.Wait(t, e.ExecID, tt.want[len(tt.want)-1])
			if got := states(evs); !slices.Equal(got, tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			// Backoff: attempt n+1 is triggered no earlier than
			// base·2^(n-1) after attempt n failed.
			for i, x := range evs {
				if x.To != RW {
					continue
				}
				n := x.Attempt
				delay := base << (n - 1)
				if got := x.NextAttemptAt.Sub(x.At); got < delay {
					t.Errorf("attempt %d: next_attempt_at is %s after failure, want ≥ %s", n, got, delay)
				}
				next := evs[i+1] // its change may have gone on to RUNNING and beyond (Via)
				if next.Path()[0] != T || next.Attempt != n+1 {
					t.Fatalf("after RETRY_WAITING of attempt %d: %v of attempt %d", n, next.Path(), next.Attempt)
				}
				if got := next.At.Sub(x.At); got < delay {
					t.Errorf("attempt %d triggered %s after attempt %d failed, want ≥ %s", n+1, got, n, delay)
				} else {
					t.Logf("attempt %d triggered %s after attempt %d failed (backoff %s)", n+1, got, n, delay)
				}
			}
		})
	}
}
