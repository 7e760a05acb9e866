package execution

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestRepointKeepsRetryWaitingTime: a group job's attempt fails
// (RETRY_WAITING, backoff 1 s), then its lease moves before the retry was
// sent, so the execution is re-pointed at the new holder (AgentLost, no
// transition, no event). The record keeps the RETRY_WAITING's
// updated_at: a reload's history repair publishes the event of a record
// the index lacks from the record itself (controller/historyrepair.go),
// and compares the index's updated_at with the record's to decide. Found
// by TestFaultInjection (seed 23, "backoff shorter than the policy"): the
// re-point had set updated_at to its own time, 125 ms after the failure,
// and the repaired event said next_attempt_at − at = 75 ms.
func TestRepointKeepsRetryWaitingTime(t *testing.T) {
	env := tableEnv() // backoff 1 s for attempt 1
	failed := protocol.Report{V: protocol.Version, Agent: "a1", JobID: tJob, ExecID: tID, Attempt: 1, Kind: protocol.ReportFinished,
		ScheduledAt: tNow.Add(-4 * time.Hour), At: tNow, Epoch: 5, Outcome: retry.OutcomeFailure, Result: &retry.Result{Code: 75, Retryable: true}}
	waiting, _, err := Apply(recordIn("RUNNING"), Report{Report: failed}, env)
	if err != nil || waiting.State != protocol.StateRetryWaiting {
		t.Fatalf("failed report: %+v %v, want RETRY_WAITING", waiting, err)
	}
	backoff := waiting.NextAttemptAt.Sub(waiting.UpdatedAt)
	if backoff != time.Second {
		t.Fatalf("backoff %s, want the policy's 1s", backoff)
	}

	later := env
	later.Now = tNow.Add(125 * time.Millisecond)
	moved, effs, err := Apply(waiting, AgentLost{NewAgent: "a3", Epoch: 9}, later)
	if err != nil || moved.Agent != "a3" || moved.Epoch != 9 || moved.State != protocol.StateRetryWaiting || moved.Attempt != 1 {
		t.Fatalf("agent lost, retry not sent: %+v %v, want attempt 1 waiting, re-pointed at a3 under epoch 9", moved, err)
	}
	for _, e := range effs {
		if _, ok := e.(Transitioned); ok {
			t.Fatalf("re-point made a transition %+v: it is not one", e)
		}
	}
	if !moved.UpdatedAt.Equal(waiting.UpdatedAt) {
		t.Fatalf("re-point moved updated_at from %s to %s: it is the RETRY_WAITING's time", waiting.UpdatedAt, moved.UpdatedAt)
	}

	// What a reload's history repair publishes for this record (its
	// state, at its updated_at) is the RETRY_WAITING event as it was.
	if got := moved.NextAttemptAt.Sub(moved.UpdatedAt); got != time.Second {
		t.Fatalf("re-pointed record: next_attempt_at − updated_at = %s, want the policy's 1s", got)
	}
}
