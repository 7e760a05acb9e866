package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestHistoryReleasesPageCacheWhenIdle: the history follower frees the
// index writer's page cache once it has had nothing to apply for
// historyIdleRelease, and again after the next apply has been followed
// by as long a quiet spell; the index answers after each release.
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

	eventually(t, 20*time.Second, "the page cache released after the start", func() bool { return released.Load() >= 1 })
	_, id := f.oneShot(t)
	f.indexed(t, id)
	after := released.Load()
	eventually(t, 20*time.Second, "the page cache released again after an apply", func() bool { return released.Load() > after })
	if e, ok, err := c.hist.idx.Get(tctx(t), id); err != nil || !ok || !e.State.Terminal() {
		t.Fatalf("index after the release: %+v, %v, %v", e, ok, err)
	}
}
