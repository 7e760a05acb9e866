package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestHistoryReleasesPageCacheWhenIdle: the history follower frees the
// index writer's page cache at the end of a quiet window
// (historyIdleRelease) after it applied rows, and again after the next
// rows; the index answers after each release.
func TestHistoryReleasesPageCacheWhenIdle(t *testing.T) {
	clk := &steppedClock{}
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = clk
	cfg.monoNow = time.Now
	cfg.historyIdleRelease = 300 * time.Millisecond
	cfg.historyHold = 200 * time.Millisecond // the follower looks every hold/2
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Int32
	c.hooks.historyReleased = func() { released.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f := &retentionFixture{c: c, clk: clk, a: newTestAgent(t, c.NATSURL(), "edge-1", nil).start()}

	for i := range 2 {
		before := released.Load()
		job, err := c.CreateJob(tctx(t), asapJob("edge-1"))
		if err != nil {
			t.Fatal(err)
		}
		run := f.a.waitCommand("run", isRun(protocol.ExecID(job.ID, job.CreatedAt), 1)).Run
		f.a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, ok)
		id := run.ExecID
		f.indexed(t, id)
		eventually(t, 20*time.Second, fmt.Sprintf("the page cache released after apply %d", i+1), func() bool { return released.Load() > before })
		if e, ok, err := c.hist.idx.Get(tctx(t), id); err != nil || !ok || !e.State.Terminal() {
			t.Fatalf("index after release %d: %+v, %v, %v", i+1, e, ok, err)
		}
	}
}
