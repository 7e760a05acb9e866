package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestSpillBeyondQueueBoundAllRun: far more triggered executions than the
// queue holds; the overflow waits in SQLite and every one runs exactly once.
func TestSpillBeyondQueueBoundAllRun(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-s", c.srv.URL())
	cfg.Queue.Size = 16
	cfg.Workers = 2
	var mu sync.Mutex
	ran := map[string]int{}
	release := make(chan struct{})
	a := startAgent(t, cfg, WithHandler("slow", func(ctx context.Context, tk Task) Result {
		<-release
		mu.Lock()
		ran[tk.ExecID]++
		mu.Unlock()
		return Result{}
	}))
	const n = 200
	j := newJob("edge-s", "slow", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 4
	base := time.Now().Add(-time.Minute)
	ids := make([]string, n)
	for i := range n {
		cmd := runCmd(j, 1, base.Add(time.Duration(i)*time.Millisecond))
		ids[i] = cmd.Run.ExecID
		c.send("edge-s", cmd)
	}
	waitFor(t, 20*time.Second, "all triggered", func() bool { return c.count(protocol.ReportTriggered) >= n })
	close(release)
	deadline := time.Now().Add(60 * time.Second)
	for c.count(protocol.ReportFinished) < n {
		if time.Now().After(deadline) {
			for _, st := range []string{store.StatePending, store.StateTriggered, store.StateRunning} {
				rows, _ := a.Store().LiveExecs(context.Background(), st, 0, 10)
				for _, r := range rows {
					t.Logf("left %s: row %d %s", st, r.ID, r.ExecID)
				}
			}
			t.Fatalf("only %d of %d finished", c.count(protocol.ReportFinished), n)
		}
		<-time.After(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if ran[id] != 1 {
			t.Fatalf("exec %s ran %d times", id, ran[id])
		}
		if fin, _ := finishedOf(c, id); fin.Outcome != retry.OutcomeSuccess {
			t.Fatalf("exec %s outcome %s", id, fin.Outcome)
		}
	}
}
