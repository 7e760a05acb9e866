package agent

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestLingerCoalescesFastAttempt: with outbox.linger, a fast attempt's
// triggered, running and finished steps reach the controller as one
// message (the finished report, carrying triggered_at and started_at).
func TestLingerCoalescesFastAttempt(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-l", c.srv.URL())
	cfg.Outbox.Linger = 300 * time.Millisecond
	startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })
	j := newJob("edge-l", "noop", schedule.Spec{Asap: true}, nil)
	at := time.Now().Add(-time.Second)
	c.send("edge-l", runCmd(j, 1, at))
	execID := protocol.ExecID(j.ID, at)
	waitFor(t, 10*time.Second, "the finished report", func() bool { _, ok := finishedOf(c, execID); return ok })
	r, _ := finishedOf(c, execID)
	if r.TriggeredAt.IsZero() || r.StartedAt.IsZero() {
		t.Fatalf("finished report %+v: want triggered_at and started_at", r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning} {
		if n := c.msgIDs[protocol.ReportMsgID(execID, 1, k)]; n != 0 {
			t.Errorf("%s report sent %d times, want 0 (coalesced into the finished one)", k, n)
		}
	}
}
