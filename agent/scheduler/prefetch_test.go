package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestPrefetchWhileHandlersAreShort (prefetch.go): with no handler run
// yet, or with long handlers, at most workers attempts are dispatched
// (RUNNING); once handlers are short, up to workers more are, so their
// RUNNING writes are durable before a worker frees; and an attempt
// cancelled while it waits for a worker is finished without its handler
// running.
func TestPrefetchWhileHandlersAreShort(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := offlineConfig(t, "edge-p") // 4 workers
	o := newOffline(t, cfg, start)
	r := o.s.runs
	var ids []string
	for range 30 {
		j := protocoltest.NewJob("edge-p", "noop", schedule.Spec{Asap: true}, nil)
		x := protocol.ExecID(j.ID, start)
		ids = append(ids, x)
		o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: x, Attempt: 1, RunAt: start}})
	}
	o.sync()
	r.pump() // as the scheduler's loop does after each pass
	o.sync()
	runningRows := func() int {
		t.Helper()
		n := 0
		for _, x := range ids {
			if e, ok := o.row(x); ok && e.State == store.StateRunning {
				n++
			}
		}
		return n
	}
	// finish is that many handlers returning after d, then a pump.
	finish := func(n int, d time.Duration) {
		for range n {
			o.s.handle(slotFreed{dur: d})
		}
		o.sync()
		r.pump()
		o.sync()
	}

	if got := runningRows(); got != cfg.Workers || r.busy != cfg.Workers {
		t.Fatalf("before any handler ran: %d RUNNING, busy %d; want %d (no prefetch)", got, r.busy, cfg.Workers)
	}
	if us := takeUnits(r); len(us) != cfg.Workers {
		t.Fatalf("%d units handed to workers, want %d", len(us), cfg.Workers)
	}
	finish(cfg.Workers, time.Millisecond)
	if got, want := r.busy, 2*cfg.Workers; got != want {
		t.Fatalf("short handlers: busy %d, want %d (workers and as many prefetched)", got, want)
	}
	if got, want := runningRows(), 3*cfg.Workers; got != want { // the first 4 have not finished their writes here
		t.Fatalf("short handlers: %d RUNNING rows, want %d", got, want)
	}
	us := takeUnits(r)
	if len(us) != 2*cfg.Workers {
		t.Fatalf("%d units handed to workers, want %d", len(us), 2*cfg.Workers)
	}

	// One prefetched attempt is cancelled while it waits: not run.
	waiting := us[len(us)-1]
	r.running[waiting.it.id].cancel(errCancelled)
	(&worker{env: o.s.env}).runOne(waiting, &specCache{})
	o.sync()
	e, ok := o.row(waiting.it.row.ExecID)
	if !ok || e.State != store.StateFinished || e.Outcome != "cancelled" {
		t.Fatalf("cancelled while waiting: %+v, want finished, cancelled", e)
	}
	if res := string(e.Result); res == "" || !strings.Contains(res, "not started") {
		t.Fatalf("cancelled while waiting: result %s, want it not started (its handler not run)", res)
	}

	// Long handlers: the average climbs past prefetchBelow, and no more
	// than workers are dispatched again.
	finish(2*cfg.Workers-1, time.Second) // the others dispatched (the cancelled one freed its slot)
	if r.handlerAvg < prefetchBelow {
		t.Fatalf("handler average %s after long handlers, want ≥ %s", r.handlerAvg, prefetchBelow)
	}
	if r.busy != cfg.Workers {
		t.Fatalf("long handlers: busy %d, want %d (no prefetch)", r.busy, cfg.Workers)
	}
}

// TestPrefetchFollowsTheWriteRoundTrip (prefetch.go): the prefetch is the
// workers times the RUNNING write's round trip over the handlers' run
// time, rounded up, at least one worker's worth and at most
// maxPrefetchFactor; none before a handler ran, with long handlers or in
// a slow start.
func TestPrefetchFollowsTheWriteRoundTrip(t *testing.T) {
	const workers = 4
	for _, tc := range []struct {
		name           string
		handler, write time.Duration
		slowStart      bool
		want           int
	}{
		{"no handler run yet", 0, 3 * time.Millisecond, false, 0},
		{"no write measured yet", time.Millisecond, 0, false, workers},
		{"write faster than a handler", 2 * time.Millisecond, time.Millisecond, false, workers},
		{"write as long as a handler", 2 * time.Millisecond, 2 * time.Millisecond, false, workers},
		{"write three handlers long", time.Millisecond, 3 * time.Millisecond, false, 3 * workers},
		{"write two and a half handlers long: rounded up", 2 * time.Millisecond, 5 * time.Millisecond, false, 3 * workers},
		{"write thirty handlers long: capped", 100 * time.Microsecond, 3 * time.Millisecond, false, maxPrefetchFactor * workers},
		{"long handlers", prefetchBelow, time.Second, false, 0},
		{"slow start", time.Millisecond, 3 * time.Millisecond, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &runQueue{workers: workers, handlerAvg: tc.handler, writeAvg: tc.write, slowStart: tc.slowStart}
			if got := r.prefetch(); got != tc.want {
				t.Fatalf("prefetch with handlers of %s and writes of %s: %d, want %d", tc.handler, tc.write, got, tc.want)
			}
		})
	}
}

// TestPrefetchCoversSlowWrites: on the scheduler, RUNNING writes that take
// three handlers' time (the fake clock moved on between the pump and the
// write's callback) make pump dispatch the workers and three workers'
// worth more, all of them handed to workers without blocking the
// scheduler (the work channel holds them).
func TestPrefetchCoversSlowWrites(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := offlineConfig(t, "edge-w") // 4 workers
	o := newOffline(t, cfg, start)
	r := o.s.runs
	for range 60 {
		j := protocoltest.NewJob("edge-w", "noop", schedule.Spec{Asap: true}, nil)
		o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: protocol.ExecID(j.ID, start), Attempt: 1, RunAt: start}})
	}
	o.sync()
	// pumpSlow is a pump whose RUNNING write takes 3 ms.
	pumpSlow := func() {
		r.pump()
		o.clk.Advance(3 * time.Millisecond)
		o.sync()
	}
	pumpSlow()
	if n := len(takeUnits(r)); n != cfg.Workers {
		t.Fatalf("before any handler ran: %d units, want %d (no prefetch)", n, cfg.Workers)
	}
	if r.writeAvg != 3*time.Millisecond {
		t.Fatalf("write round trip %s, want 3ms", r.writeAvg)
	}
	for range cfg.Workers {
		o.s.handle(slotFreed{dur: time.Millisecond})
	}
	pumpSlow()
	want := cfg.Workers + 3*cfg.Workers
	if r.busy != want {
		t.Fatalf("handlers of 1ms, writes of 3ms: busy %d, want %d", r.busy, want)
	}
	if n := len(takeUnits(r)); n != want {
		t.Fatalf("%d units handed to workers, want %d", n, want)
	}
}
