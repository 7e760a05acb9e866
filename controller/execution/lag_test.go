package execution

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestReportStepsLag: a finished report that stands for its running step
// (StartedAt set: the running report was superseded in the agent's
// outbox) gives that step the lag it carries, and, from an agent that
// sends none, how late the attempt started after its scheduled time — not
// 0, which is what the schedule-lag histogram showed for every coalesced
// report under load.
func TestReportStepsLag(t *testing.T) {
	sched := tNow
	base := protocol.Report{V: protocol.Version, Agent: "a1", JobID: tJob, ExecID: tID, Attempt: 1, Kind: protocol.ReportFinished, Epoch: 5,
		ScheduledAt: sched, At: sched.Add(time.Second), TriggeredAt: sched.Add(5 * time.Millisecond),
		StartedAt: sched.Add(300 * time.Millisecond), Outcome: retry.OutcomeSuccess, Result: &retry.Result{}}
	for _, tt := range []struct {
		name string
		lag  time.Duration // the report's
		want time.Duration // the running step's
	}{
		{"sent by the agent", 250 * time.Millisecond, 250 * time.Millisecond},
		{"not sent", 0, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			r.Lag = protocol.Duration(tt.lag)
			steps := ReportSteps(r)
			if len(steps) != 3 || steps[1].Kind != protocol.ReportRunning {
				t.Fatalf("steps %+v, want triggered, running, finished", steps)
			}
			if got := steps[1].Lag.D(); got != tt.want {
				t.Fatalf("running step's lag %s, want %s", got, tt.want)
			}
			next, _, err := Apply(recordIn("PENDING"), Report{Report: r}, tableEnv())
			if err != nil || next.Lag.D() != tt.want {
				t.Fatalf("applied: %+v %v, want the record's lag %s", next, err, tt.want)
			}
		})
	}
	early := base
	early.StartedAt = sched.Add(-time.Millisecond) // clocks apart: never negative
	if got := ReportSteps(early)[1].Lag; got != 0 {
		t.Fatalf("started before its schedule: lag %s, want 0", got.D())
	}
}
