package controller

import (
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestCoalescedSkippedReport: a skipped report standing for several fires
// (skipped_count, first_scheduled_at) is recorded as one SKIPPED
// execution with the count and the first fire time, and
// ax_executions_total{state=SKIPPED} counts every fire it stands for.
func TestCoalescedSkippedReport(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	job, err := c.CreateJob(ctx, everyJob("edge-1", "10ms"))
	if err != nil {
		t.Fatal(err)
	}
	a.waitCommand("assign", isAssign(job.ID, 1))
	s, err := schedule.Parse(job.Schedule, job.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.Next(job.CreatedAt)
	last := first.Add(99 * 10 * time.Millisecond)
	before := testutil.MetricValue(t, c.m.executions.WithLabelValues("SKIPPED"))
	r := a.rep(job.ID, protocol.ExecID(job.ID, last), 1, protocol.ReportSkipped, last)
	r.Reason, r.SkippedCount, r.FirstScheduledAt = "overlap", 100, first
	a.publish(r, "")
	e := waitExec(t, c, r.ExecID, "SKIPPED", inState(protocol.StateSkipped))
	if e.SkippedCount != 100 || !e.FirstScheduledAt.Equal(first) || e.Fires() != 100 || e.Reason != "overlap" {
		t.Fatalf("execution %+v: want 100 fires from %s, reason overlap", e, first)
	}
	// The counter moves after the record is stored: wait for it, then
	// check that it moved by the count, not by one.
	eventually(t, 10*time.Second, "ax_executions_total{state=SKIPPED} grown", func() bool {
		return testutil.MetricValue(t, c.m.executions.WithLabelValues("SKIPPED"))-before > 0
	})
	if got := testutil.MetricValue(t, c.m.executions.WithLabelValues("SKIPPED")) - before; got != 100 {
		t.Fatalf("ax_executions_total{state=SKIPPED} grew by %v, want 100", got)
	}
}
