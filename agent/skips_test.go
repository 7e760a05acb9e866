package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestSkippedFiresCoalesced: under overload (overlap=forbid jobs every
// 10ms whose attempts do not end), a job's skipped fires are reported as
// few coalesced reports with a count, and every fire time from the first
// to the last reported is accounted for exactly once: by a triggered
// report or inside one skipped report's range first_scheduled_at ..
// scheduled_at, with skipped_count fires.
func TestSkippedFiresCoalesced(t *testing.T) {
	const every = 10 * time.Millisecond
	c := startCtl(t)
	cfg := testConfig(t, "edge-k", c.srv.URL())
	cfg.Outbox.SkippedWindow = time.Second // a report per job per second (the attempts never end)
	release := make(chan struct{})
	startAgent(t, cfg, WithHandler("block", func(ctx context.Context, _ Task) Result {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Result{}
	}))
	t.Cleanup(func() { close(release) })
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })
	ids := make([]string, 3)
	for i := range ids {
		j := newJob("edge-k", "block", schedule.Spec{Every: every.String()}, nil)
		j.CreatedAt = time.Now().UTC().Truncate(time.Second)
		ids[i] = j.ID
		c.send("edge-k", assignCmd(j))
	}
	byJob := func(id string) (trig []time.Time, skips []protocol.Report) {
		for _, r := range c.all() {
			switch {
			case r.JobID != id:
			case r.Kind == protocol.ReportTriggered:
				trig = append(trig, r.ScheduledAt)
			case r.Kind == protocol.ReportSkipped:
				skips = append(skips, r)
			}
		}
		return trig, skips
	}
	waitFor(t, 30*time.Second, "two skipped reports of every job", func() bool {
		for _, id := range ids {
			if _, skips := byJob(id); len(skips) < 2 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		trig, skips := byJob(id)
		if len(trig) != 1 {
			t.Fatalf("job %s: %d triggered fires, want 1 (its attempt never ends)", id, len(trig))
		}
		fires := []time.Time{trig[0]}
		total := 0
		for _, r := range skips {
			if r.Reason != "overlap" {
				t.Fatalf("job %s: skipped report %+v, want reason overlap", id, r)
			}
			first := r.ScheduledAt
			if r.SkippedCount > 0 {
				first = r.FirstScheduledAt
			}
			n := 0
			for at := first; !at.After(r.ScheduledAt); at = at.Add(every) {
				fires = append(fires, at)
				n++
			}
			if n != r.Fires() {
				t.Fatalf("job %s: skipped report from %s to %s has count %d, want %d", id, first, r.ScheduledAt, r.Fires(), n)
			}
			total += n
		}
		slices.SortFunc(fires, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(fires); i++ {
			if d := fires[i].Sub(fires[i-1]); d != every {
				t.Fatalf("job %s: fires %s and %s are %s apart, want %s (a fire lost or counted twice)", id, fires[i-1], fires[i], d, every)
			}
		}
		// One report per job per second (the window), not one per fire.
		if total < 10*len(skips) {
			t.Fatalf("job %s: %d skipped fires in %d reports, want them coalesced (≥ 10 per report)", id, total, len(skips))
		}
	}
}
