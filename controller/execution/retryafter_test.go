package execution

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestApplyReportRetryAfter: a finished report's retry_after is a floor
// under the backoff, capped by the policy's Max.
func TestApplyReportRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261129120000-abcdef"
	exec := protocol.ExecID(job, now)
	pol := retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
	for _, tc := range []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		want       time.Duration // NextAttemptAt - now
	}{
		{"no retry_after: backoff", 1, 0, time.Second},
		{"retry_after over the backoff", 1, 10 * time.Second, 10 * time.Second},
		{"backoff over retry_after", 2, time.Second, 2 * time.Second},
		{"retry_after under the backoff", 1, 500 * time.Millisecond, time.Second},
		{"retry_after capped by retry.max", 1, 5 * time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: tc.attempt, State: protocol.StateRunning, Agent: "a1"},
				Applied: []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning}}
			r := protocol.Report{V: protocol.Version, Agent: "a1", JobID: job, ExecID: exec, Attempt: tc.attempt, Kind: protocol.ReportFinished,
				ScheduledAt: now, At: now, Outcome: retry.OutcomeFailure, Result: &retry.Result{Code: 503, Retryable: true},
				RetryAfter: protocol.Duration(tc.retryAfter)}
			res := applyR(cur, r, func() retry.Policy { return pol }, nil, now, nil)
			if res.reject != nil || res.next == nil || res.next.State != protocol.StateRetryWaiting {
				t.Fatalf("apply: reject %q %s, want RETRY_WAITING", res.reject, res.detail)
			}
			if got := res.next.NextAttemptAt.Sub(now); got != tc.want {
				t.Fatalf("next attempt in %s, want %s", got, tc.want)
			}
		})
	}
}
