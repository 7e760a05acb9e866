package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestSkippedRunWindow: with outbox.coalesce_skipped, the fires of a job
// skipped while its attempt is active are written as one SKIPPED row and
// report only once the run is Config.SkippedWindow old (at a tick), with
// the count and the first and last fire times; the ticks before write
// nothing, and the job is listed once however many ticks pass.
func TestSkippedRunWindow(t *testing.T) {
	const window = 5 * time.Second
	cfg := offlineConfig(t, "edge-w")
	cfg.Outbox.CoalesceSkipped, cfg.Outbox.SkippedWindow = true, window
	o := newOffline(t, cfg, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := protocoltest.NewJob("edge-w", "noop", schedule.Spec{Every: "1s"}, nil)
	j.Overlap, j.Concurrency = protocol.OverlapForbid, 1
	o.apply(protocoltest.AssignCmd(j))

	first := o.fireNext(j.ID) // TRIGGERED; no worker runs it here, so it stays active
	if e, ok := o.row(protocol.ExecID(j.ID, first)); !ok || e.State != store.StateTriggered {
		t.Fatalf("first fire: %+v %v, want TRIGGERED", e, ok)
	}
	var skipped []time.Time
	began := o.clk.Now()
	for o.clk.Now().Sub(began) < window-time.Second {
		skipped = append(skipped, o.fireNext(j.ID))
		o.s.onTick()
		o.sync()
		for _, at := range skipped {
			if _, ok := o.row(protocol.ExecID(j.ID, at)); ok {
				t.Fatalf("skipped fire %s written %s after its run began, before the %s window", at, o.clk.Now().Sub(began), window)
			}
		}
	}
	if n := len(o.s.trig.skipping); n != 1 {
		t.Fatalf("%d entries listed for one job's run", n)
	}
	for o.clk.Now().Sub(began) < window+time.Second {
		skipped = append(skipped, o.fireNext(j.ID))
	}
	o.s.onTick()
	o.sync()
	last := skipped[len(skipped)-1]
	e, ok := o.row(protocol.ExecID(j.ID, last))
	if !ok || e.State != store.StateSkipped {
		t.Fatalf("after the window, the run's row %+v %v, want SKIPPED", e, ok)
	}
	msgs, err := o.st.Outbox(context.Background(), 0, 100)
	must(t, err)
	var reps []protocol.Report
	for _, m := range msgs {
		r, err := protocol.DecodeReport(m.Data)
		must(t, err)
		if r.Kind == protocol.ReportSkipped {
			reps = append(reps, r)
		}
	}
	if len(reps) != 1 {
		t.Fatalf("%d skipped reports, want 1: %+v", len(reps), reps)
	}
	r := reps[0]
	if r.SkippedCount != len(skipped) || !r.FirstScheduledAt.Equal(skipped[0]) || !r.ScheduledAt.Equal(last) {
		t.Fatalf("report count %d first %s last %s, want %d, %s, %s", r.SkippedCount, r.FirstScheduledAt, r.ScheduledAt,
			len(skipped), skipped[0], last)
	}
	if n := len(o.s.trig.skipping); n != 0 {
		t.Fatalf("%d entries listed after the run was written", n)
	}
}
