package agent

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestReportsPublishedFromMemory: a fresh agent publishes every report of
// its attempts without reading the outbox back (store.Stats().OutboxReads
// stays 0), every one arrives once, and the acknowledged rows are deleted.
func TestReportsPublishedFromMemory(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-m", c.srv.URL())
	a := startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })
	j := newJob("edge-m", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 8
	base := time.Now().Add(-time.Minute)
	const n = 100
	for i := range n {
		c.send("edge-m", runCmd(j, 1, base.Add(time.Duration(i)*time.Millisecond)))
	}
	waitFor(t, 30*time.Second, "every finished report", func() bool { return c.count(protocol.ReportFinished) == n })
	waitFor(t, 10*time.Second, "the outbox emptied", func() bool {
		cnt, err := a.Store().Counts(context.Background())
		return err == nil && cnt.Outbox == 0
	})
	if got := checkComplete(t, c); got != n {
		t.Errorf("%d attempts triggered, want %d", got, n)
	}
	if r := a.Store().Stats().OutboxReads; r != 0 {
		t.Fatalf("outbox read back %d times, want 0 (published from memory)", r)
	}
}

// TestMemOutboxBounded: past its bound the memory outbox lets the oldest
// rows go and says that rows after an older seq must be read from SQLite.
func TestMemOutboxBounded(t *testing.T) {
	m := newMemOutbox(4, func() {})
	m.setBase(10)
	if _, ok := m.after(9, 10); ok {
		t.Fatal("rows up to the base must be read from the store")
	}
	for seq := int64(11); seq <= 15; seq++ {
		m.add([]store.OutboxMsg{{Seq: seq}})
	}
	// 5 rows > 4: the oldest 3 went, 14 and 15 stay.
	if _, ok := m.after(12, 10); ok {
		t.Fatal("rows let go (seq 11..13) must be read from the store")
	}
	rows, ok := m.after(13, 10)
	if !ok || len(rows) != 2 || rows[0].Seq != 14 {
		t.Fatalf("after 13: %v %v, want 14 and 15 from memory", rows, ok)
	}
	m.acked(14)
	if rows, ok := m.after(14, 10); !ok || len(rows) != 1 || rows[0].Seq != 15 {
		t.Fatalf("after ack 14: %v %v, want 15", rows, ok)
	}
}
