package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestOverlapAndConcurrencyHoldUnderSpill: 60 periodic jobs every 100ms
// whose handler blocks, on an agent with 4 workers and a ready queue of 16 (the smallest allowed):
// most triggered attempts wait in SQLite. Spilled or not, an overlap=forbid
// job never has more live (TRIGGERED or RUNNING) attempts than its
// concurrency and each of its other fires is recorded SKIPPED (every fire
// time has a row: none is dropped silently); queue and allow jobs record
// every fire TRIGGERED; no job ever runs more attempts at once than its
// concurrency.
func TestOverlapAndConcurrencyHoldUnderSpill(t *testing.T) {
	tests := []struct {
		overlap     string
		concurrency int
	}{
		{protocol.OverlapForbid, 1},
		{protocol.OverlapForbid, 2},
		{protocol.OverlapAllow, 2},
		{protocol.OverlapQueue, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s-%d", tc.overlap, tc.concurrency), func(t *testing.T) {
			const n, every = 60, 100 * time.Millisecond
			c := startCtl(t)
			cfg := testConfig(t, "edge-o", c.srv.URL())
			cfg.Queue.Size = 16
			cfg.Workers = 4
			cfg.Outbox.CoalesceSkipped = false // a row per fire (TestSkippedFiresCoalesced covers the counts)
			release := make(chan struct{})
			a := startAgent(t, cfg, WithHandler("block", func(ctx context.Context, _ Task) Result {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return Result{}
			}))
			t.Cleanup(func() { close(release) }) // before the agent stops
			created := time.Now().UTC().Truncate(time.Second)
			ids := make([]string, n)
			for i := range n {
				j := newJob("edge-o", "block", schedule.Spec{Every: every.String()}, nil)
				j.CreatedAt = created
				j.Overlap, j.Concurrency = tc.overlap, tc.concurrency
				ids[i] = j.ID
				c.send("edge-o", assignCmd(j))
			}
			forbid := tc.overlap == protocol.OverlapForbid
			fires := func() int { return c.count(protocol.ReportTriggered) + c.count(protocol.ReportSkipped) }
			spilledAt := -1 // fires reported when the store first held more TRIGGERED than the queue
			waitFor(t, 60*time.Second, "4 fires of each job, and 4 more per job after the queue spilled", func() bool {
				live, err := a.Store().LiveByJob(context.Background())
				must(t, err)
				triggered := 0
				for id, l := range live {
					triggered += l.Triggered
					if l.Running > tc.concurrency {
						t.Fatalf("job %s runs %d attempts at once, concurrency %d", id, l.Running, tc.concurrency)
					}
					if forbid && l.Triggered+l.Running > tc.concurrency {
						t.Fatalf("overlap=forbid job %s has %d live attempts (%d triggered, %d running), concurrency %d",
							id, l.Triggered+l.Running, l.Triggered, l.Running, tc.concurrency)
					}
				}
				if spilledAt < 0 && triggered > cfg.Queue.Size {
					spilledAt = fires()
				}
				if spilledAt < 0 || fires() < spilledAt+4*n {
					return false
				}
				for _, id := range ids {
					rows, err := a.Store().JobExecs(context.Background(), id, 4)
					must(t, err)
					if len(rows) < 4 {
						return false
					}
				}
				return true
			})
			// Every fire time of each job, from its first to its last, has a
			// row: TRIGGERED/RUNNING, or SKIPPED (forbid only).
			skipped := 0
			for _, id := range ids {
				rows, err := a.Store().JobExecs(context.Background(), id, 10000)
				must(t, err)
				for i, e := range rows {
					if i > 0 && e.ScheduledAt.Sub(rows[i-1].ScheduledAt) != every {
						t.Fatalf("job %s: no record of the fires between %s and %s", id, rows[i-1].ScheduledAt, e.ScheduledAt)
					}
					switch {
					case e.State == store.StateSkipped && forbid:
						skipped++
					case e.State == store.StateTriggered || e.State == store.StateRunning:
					default:
						t.Fatalf("job %s: fire %s is %s (%s)", id, e.ExecID, e.State, e.Outcome)
					}
				}
			}
			if forbid && skipped == 0 {
				t.Fatal("no fire was skipped by overlap=forbid")
			}
			// The SKIPPED fires are reported, with their reason.
			waitFor(t, 30*time.Second, "the skipped fires reported", func() bool {
				n := 0
				for _, r := range c.all() {
					if r.Kind == protocol.ReportSkipped && r.Reason == "overlap" {
						n++
					}
				}
				return n >= skipped
			})
		})
	}
}

// TestBlockedJobDoesNotStarveOthers: an overlap=queue job whose handler
// blocks fires every 20ms; its attempts wait for it, but no more of them
// stay in memory than it may run at once, so the ready queue (16) does not
// fill with them: another job's fires still run on the free workers.
func TestBlockedJobDoesNotStarveOthers(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-h", c.srv.URL())
	cfg.Queue.Size = 16
	cfg.Workers = 4
	release := make(chan struct{})
	var ran atomic.Int64
	a := startAgent(t, cfg, WithHandler("block", func(ctx context.Context, _ Task) Result {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Result{}
	}), WithHandler("ok", func(context.Context, Task) Result { ran.Add(1); return Result{} }))
	t.Cleanup(func() { close(release) })
	blocked := newJob("edge-h", "block", schedule.Spec{Every: "20ms"}, nil)
	blocked.Overlap = protocol.OverlapQueue
	c.send("edge-h", assignCmd(blocked))
	waitFor(t, 20*time.Second, "more of the blocked job's fires waiting than the queue holds", func() bool {
		live, err := a.Store().LiveByJob(context.Background())
		must(t, err)
		return live[blocked.ID].Triggered > 2*cfg.Queue.Size
	})
	other := newJob("edge-h", "ok", schedule.Spec{Every: "100ms"}, nil)
	c.send("edge-h", assignCmd(other))
	waitFor(t, 20*time.Second, "3 runs of the other job while the blocked job's fires wait", func() bool { return ran.Load() >= 3 })
}
