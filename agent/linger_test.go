package agent

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/clock"
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
	a := startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
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
		if n := c.msgIDs[a.msgSalt+"/"+protocol.ReportMsgID(execID, 1, k)]; n != 0 {
			t.Errorf("%s report sent %d times, want 0 (coalesced into the finished one)", k, n)
		}
	}
}

// TestLingerHoldsEarlierSteps fails if outbox.linger does nothing: the
// attempt's handler is held until either its triggered or running report
// reached the controller (what a flusher without linger does at once) or
// the flusher is waiting out its linger (on a fake clock that does not
// move by itself). With the linger, nothing of the attempt is published
// before the clock moves past it, and then only the finished report.
func TestLingerHoldsEarlierSteps(t *testing.T) {
	const linger = 100 * time.Millisecond
	c := startCtl(t)
	cfg := testConfig(t, "edge-lh", c.srv.URL())
	cfg.Outbox.Linger = linger
	cfg.Clock.MaxSkew = time.Hour // the fake clock stands still: not a skew
	clk := clock.NewFake(time.Now())
	j := newJob("edge-lh", "hold", schedule.Spec{Asap: true}, nil)
	at := clk.Now().Add(-time.Second)
	execID := protocol.ExecID(j.ID, at)
	var a *Agent
	seen := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		// Msg-Ids carry the agent's salt.
		return c.msgIDs[a.msgSalt+"/"+protocol.ReportMsgID(execID, 1, protocol.ReportTriggered)]+
			c.msgIDs[a.msgSalt+"/"+protocol.ReportMsgID(execID, 1, protocol.ReportRunning)] > 0
	}
	a = startAgent(t, cfg, WithClock(clk), WithHandler("hold", func(context.Context, Task) Result {
		waitFor(t, 10*time.Second, "an earlier step published, or the flusher lingering", func() bool {
			return seen() || a.lingers.Load() > 0
		})
		return Result{}
	}))
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })
	c.send("edge-lh", runCmd(j, 1, at))
	waitFor(t, 10*time.Second, "the finished row", func() bool {
		e, err := a.Store().ExecByID(context.Background(), execID, 1)
		return err == nil && e.State == store.StateFinished
	})
	if seen() {
		t.Fatal("the triggered or running report was published before the linger ended")
	}
	// Advanced on every poll: a linger timer the flusher sets after one
	// advance (it may still be on its way to it) is moved past by the next.
	waitFor(t, 10*time.Second, "the finished report", func() bool {
		clk.Advance(linger)
		_, ok := finishedOf(c, execID)
		return ok
	})
	if seen() {
		t.Fatal("the triggered or running report was published besides the finished one")
	}
}
