package scheduler

import (
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// TestRowReportCarriesEarlierSteps: a report after the triggered one
// carries the times of the steps before it, and with the started time the
// running step's lag, so that the finished report the flusher may send in
// place of the running one still tells the controller how late the attempt
// started (it showed 0 for every such report before).
func TestRowReportCarriesEarlierSteps(t *testing.T) {
	sched := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	e := store.Exec{JobID: "ax-t-20261204000000-abcdef", ExecID: "ax-t-20261204000000-abcdef-1796342400000", Attempt: 1,
		ScheduledAt: sched, TriggeredAt: sched.Add(5 * time.Millisecond), StartedAt: sched.Add(300 * time.Millisecond)}
	for _, tt := range []struct {
		kind               protocol.ReportKind
		triggered, started bool
		lag                time.Duration
	}{
		{protocol.ReportTriggered, false, false, 0},
		{protocol.ReportRunning, true, false, 0}, // runningReport sets its own
		{protocol.ReportFinished, true, true, 300 * time.Millisecond},
		{protocol.ReportInterrupted, true, true, 300 * time.Millisecond},
	} {
		r := rowReport(e, tt.kind)
		if !r.TriggeredAt.IsZero() != tt.triggered || !r.StartedAt.IsZero() != tt.started || r.Lag.D() != tt.lag {
			t.Errorf("%s: triggered_at %v, started_at %v, lag %s; want triggered_at %v, started_at %v, lag %s",
				tt.kind, r.TriggeredAt, r.StartedAt, r.Lag.D(), tt.triggered, tt.started, tt.lag)
		}
	}
	// An attempt that never started (interrupted while queued): no lag.
	e.StartedAt = time.Time{}
	if r := rowReport(e, protocol.ReportInterrupted); !r.StartedAt.IsZero() || r.Lag != 0 {
		t.Errorf("not started: started_at %v, lag %s; want neither", r.StartedAt, r.Lag.D())
	}
}
