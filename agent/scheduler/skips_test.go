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

// TestSkippedRunHeldAcrossRealFires: a job's run of skipped fires is not
// written when a real fire of the job comes (that made one record per real
// fire under overload); the real fire holds the run in the job's row, so
// that a crash does not lose it although last_fire moved past it. After a
// restart the run is taken back from the row and written at the window,
// with its count and first and last fire, and the row holds nothing more.
func TestSkippedRunHeldAcrossRealFires(t *testing.T) {
	const window = time.Minute
	cfg := offlineConfig(t, "edge-h")
	cfg.Outbox.CoalesceSkipped, cfg.Outbox.SkippedWindow = true, window
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	j := protocoltest.NewJob("edge-h", "noop", schedule.Spec{Every: "1s"}, nil)
	j.Overlap, j.Concurrency = protocol.OverlapForbid, 1
	o.apply(protocoltest.AssignCmd(j))
	ctx := context.Background()

	o.fireNext(j.ID) // TRIGGERED; no worker runs it here, so it stays active
	s1, s2 := o.fireNext(j.ID), o.fireNext(j.ID)
	o.s.jobs.byID[j.ID].active-- // the attempt ended (no worker in this harness)
	real := o.fireNext(j.ID)
	if e, ok := o.row(protocol.ExecID(j.ID, real)); !ok || e.State != store.StateTriggered {
		t.Fatalf("fire after the attempt ended: %+v %v, want TRIGGERED", e, ok)
	}
	if _, ok := o.row(protocol.ExecID(j.ID, s2)); ok {
		t.Fatal("the run of skipped fires was written with the real fire, before its window")
	}
	row, err := o.st.Job(ctx, j.ID)
	must(t, err)
	want := store.Skips{N: 2, First: s1, Last: s2}
	if row.Skips != want || !row.LastFire.Equal(real) {
		t.Fatalf("job row holds %+v, last_fire %s; want %+v, last_fire %s", row.Skips, row.LastFire, want, real)
	}
	o.fireNext(j.ID) // skipped again: in memory only, after last_fire

	// Crash: the store is closed without the scheduler's shutdown.
	must(t, o.st.Close())
	o2 := newOffline(t, cfg, o.clk.Now().Add(time.Second))
	must(t, o2.s.Recover(ctx))
	o2.sync()
	if _, ok := o2.row(protocol.ExecID(j.ID, s2)); ok {
		t.Fatal("the held run was written at the restart, before its window")
	}
	o2.clk.Set(o2.clk.Now().Add(window))
	o2.s.onTick()
	o2.sync()
	e, ok := o2.row(protocol.ExecID(j.ID, s2))
	if !ok || e.State != store.StateSkipped {
		t.Fatalf("after the window, the held run's row %+v %v, want SKIPPED", e, ok)
	}
	msgs, err := o2.st.Outbox(ctx, 0, 100)
	must(t, err)
	var got *protocol.Report
	for _, m := range msgs {
		r, err := protocol.DecodeReport(m.Data)
		must(t, err)
		if r.Kind == protocol.ReportSkipped && r.ExecID == protocol.ExecID(j.ID, s2) {
			got = &r
		}
	}
	if got == nil || got.SkippedCount != 2 || !got.FirstScheduledAt.Equal(s1) || !got.ScheduledAt.Equal(s2) || got.Reason != "overlap" {
		t.Fatalf("held run's report %+v, want 2 fires %s..%s, reason overlap", got, s1, s2)
	}
	row, err = o2.st.Job(ctx, j.ID)
	must(t, err)
	if row.Skips != (store.Skips{}) {
		t.Fatalf("job row still holds %+v after the run was written", row.Skips)
	}
}
