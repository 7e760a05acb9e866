package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestOneShotsAndTrigger: asap and delay jobs run once and reach SUCCESS;
// TriggerJob on a periodic job makes one extra execution.
func TestOneShotsAndTrigger(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	startAgent(t, agentConfig("edge-o", c.NATSURL(), t.TempDir(), nil), agent.WithHandler("noop", noop))
	waitAgentOnline(t, c, "edge-o")
	want := []protocol.State{protocol.StatePending, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess}

	for _, tt := range []struct {
		name  string
		spec  schedule.Spec
		delay time.Duration
	}{
		{"asap", schedule.Spec{Asap: true}, 0},
		{"delay", schedule.Spec{Delay: "300ms"}, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := createJob(t, c, protocol.Job{Name: tt.name, Handler: "noop", Schedule: tt.spec,
				Target: protocol.Target{Agent: "edge-o"}})
			e := waitExecs(t, c, j.ID, 1, "in SUCCESS", inState(protocol.StateSuccess))[0]
			if got := e.ScheduledAt.Sub(j.CreatedAt); got < tt.delay || got > tt.delay+time.Second {
				t.Errorf("scheduled %s after creation, want %s", got, tt.delay)
			}
			if e.TriggeredAt.Before(e.ScheduledAt) {
				t.Errorf("triggered at %v, before its scheduled time %v", e.TriggeredAt, e.ScheduledAt)
			}
			if got := states(ev.Wait(t, e.ExecID, protocol.StateSuccess)); !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			// Triggering the one-shot again makes exactly one more
			// execution: the first one is not re-run.
			if _, err := c.TriggerJob(testutil.Context(t, 80*time.Second), j.ID); err != nil {
				t.Fatalf("TriggerJob: %v", err)
			}
			waitExecs(t, c, j.ID, 2, "in SUCCESS", inState(protocol.StateSuccess))
			if n := len(execs(t, c, j.ID)); n != 2 {
				t.Errorf("%d executions after one run and one trigger, want 2", n)
			}
		})
	}

	t.Run("trigger-periodic", func(t *testing.T) {
		j := createJob(t, c, protocol.Job{Name: "hourly", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
			Target: protocol.Target{Agent: "edge-o"}})
		x, err := c.TriggerJob(testutil.Context(t, 80*time.Second), j.ID)
		if err != nil {
			t.Fatalf("TriggerJob: %v", err)
		}
		e := waitExec(t, c, x.ExecID, "SUCCESS", inState(protocol.StateSuccess))
		if e.Agent != "edge-o" {
			t.Errorf("ran on %q, want edge-o", e.Agent)
		}
		if got := states(ev.Wait(t, e.ExecID, protocol.StateSuccess)); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
		if all := execs(t, c, j.ID); len(all) != 1 || all[0].ExecID != x.ExecID {
			t.Errorf("executions %s, want only the triggered %s", summarize(all), x.ExecID)
		}
	})
}
