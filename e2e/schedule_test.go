package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

func noop(context.Context, agent.Task) agent.Result { return agent.Result{} }

// TestPeriodicJobsReachSuccess: an every job and a seconds-field cron job
// pinned to a real agent fire there and reach SUCCESS in the controller,
// with TRIGGERED → RUNNING → SUCCESS on AX_EVT.
func TestPeriodicJobsReachSuccess(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	startAgent(t, agentConfig("edge-1", c.NATSURL(), t.TempDir(), nil), agent.WithHandler("noop", noop))
	waitAgentOnline(t, c, "edge-1")

	for _, tt := range []struct {
		name string
		spec schedule.Spec
	}{
		{"every", schedule.Spec{Every: "200ms"}},
		{"cron-seconds", schedule.Spec{Cron: "*/1 * * * * *"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := createJob(t, c, protocol.Job{Name: tt.name, Handler: "noop", Schedule: tt.spec,
				Target: protocol.Target{Agent: "edge-1"}})
			done := waitExecs(t, c, j.ID, 2, "in SUCCESS", inState(protocol.StateSuccess))
			for _, e := range done[:2] {
				if e.Agent != "edge-1" || e.Attempt != 1 {
					t.Errorf("%s: agent %q attempt %d, want edge-1 attempt 1", e.ExecID, e.Agent, e.Attempt)
				}
				if want := protocol.ExecID(j.ID, e.ScheduledAt); e.ExecID != want {
					t.Errorf("exec id %s, want %s", e.ExecID, want)
				}
				if e.FinishedAt.IsZero() || e.StartedAt.IsZero() || e.Outcome != "success" {
					t.Errorf("%s: started %v finished %v outcome %q", e.ExecID, e.StartedAt, e.FinishedAt, e.Outcome)
				}
				got := states(ev.Wait(t, e.ExecID, protocol.StateSuccess))
				want := []protocol.State{protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess}
				if !slices.Equal(got, want) {
					t.Errorf("events of %s: %v, want %v", e.ExecID, got, want)
				}
			}
			if err := c.DeleteJob(testutil.Context(t, 80*time.Second), j.ID); err != nil {
				t.Fatalf("DeleteJob: %v", err)
			}
		})
	}
}
