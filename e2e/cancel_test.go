package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestCancelRunningExecution: CancelExecution reaches the agent, cancels
// the running handler's context, and the execution ends CANCELLED.
func TestCancelRunningExecution(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	started := make(chan string, 1)
	ended := make(chan error, 1)
	block := func(ctx context.Context, tk agent.Task) agent.Result {
		started <- tk.ExecID
		<-ctx.Done()
		ended <- ctx.Err()
		return agent.Result{Code: 1, Message: "stopped", Retryable: true}
	}
	ra := startAgent(t, agentConfig("edge-c", c.NATSURL(), t.TempDir(), nil), agent.WithHandler("block", block))
	waitAgentOnline(t, c, "edge-c")

	createJob(t, c, protocol.Job{Name: "long", Handler: "block", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-c"}, Retry: protocol.RetrySpec{MaxAttempts: 3}})
	var execID string
	select {
	case execID = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("handler did not start")
	}
	waitExec(t, c, execID, "RUNNING", inState(protocol.StateRunning))
	if _, err := c.CancelExecution(testutil.Context(t, 80*time.Second), execID); err != nil {
		t.Fatalf("CancelExecution: %v", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context ended with %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler context was not cancelled")
	}
	e := waitExec(t, c, execID, "CANCELLED", inState(protocol.StateCancelled))
	if e.Outcome != retry.OutcomeCancelled || e.Attempt != 1 {
		t.Errorf("outcome %q attempt %d, want cancelled at attempt 1", e.Outcome, e.Attempt)
	}
	ev.Wait(t, execID, protocol.StateCancelled)
	// The agent's own record of the attempt ends with outcome cancelled, and
	// once its report has been published (outbox empty) the controller
	// still holds CANCELLED: the late report neither retries nor moves it.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "agent finished the attempt and drained its outbox" }, func() bool {
		x, err := ra.Agent.Store().ExecByID(context.Background(), execID, 1)
		if err != nil || x.State != store.StateFinished || x.Outcome != string(retry.OutcomeCancelled) {
			return false
		}
		n, err := ra.Agent.Store().Counts(context.Background())
		return err == nil && n.Outbox == 0
	})
	if e, err := c.GetExecution(testutil.Context(t, 80*time.Second), execID); err != nil || e.State != protocol.StateCancelled || e.Attempt != 1 {
		t.Errorf("after the agent's report: %+v (err %v), want CANCELLED at attempt 1", e, err)
	}
}
