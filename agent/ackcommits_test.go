package agent

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestAttemptsOneByOneCommitThreeTimes: attempts that come one at a time
// (each run sent once the last one's finished report arrived, as at a
// few runs a second) take three commits each: the triggered row, the
// running row and the finished row with its report. The delete of the
// reports the controller acknowledged joins the next attempt's commit
// (store.AckLater); as a write of its own it made a fourth.
func TestAttemptsOneByOneCommitThreeTimes(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-ac", c.srv.URL())
	cfg.NATS.Heartbeat = time.Hour // nothing else writes meanwhile
	a := startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })
	outboxEmpty := func() bool {
		n, err := a.Store().Counts(context.Background())
		return err == nil && n.Outbox == 0
	}
	waitFor(t, 10*time.Second, "the registration's writes settled", outboxEmpty)
	const attempts = 10
	st0 := a.Store().Stats()
	for range attempts {
		j := newJob("edge-ac", "noop", schedule.Spec{Asap: true}, nil)
		at := time.Now().Add(-time.Second)
		c.send("edge-ac", runCmd(j, 1, at))
		waitFinished(t, c, 10*time.Second, protocol.ExecID(j.ID, at))
		waitFor(t, 10*time.Second, "the finished report acknowledged", outboxEmpty)
	}
	commits := a.Store().Stats().Commits - st0.Commits
	t.Logf("%d attempts one by one: %d commits", attempts, commits)
	if commits > 3*attempts+1 {
		t.Fatalf("%d commits for %d attempts one by one, want at most %d (three each)", commits, attempts, 3*attempts+1)
	}
}
