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
	// take is a worker taking the units handed to workers (the offline
	// scheduler runs none).
	take := func() []workUnit {
		var us []workUnit
		for {
			select {
			case u := <-r.work:
				us = append(us, u)
			default:
				return us
			}
		}
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
	if us := take(); len(us) != cfg.Workers {
		t.Fatalf("%d units handed to workers, want %d", len(us), cfg.Workers)
	}
	finish(cfg.Workers, time.Millisecond)
	if got, want := r.busy, 2*cfg.Workers; got != want {
		t.Fatalf("short handlers: busy %d, want %d (workers and as many prefetched)", got, want)
	}
	if got, want := runningRows(), 3*cfg.Workers; got != want { // the first 4 have not finished their writes here
		t.Fatalf("short handlers: %d RUNNING rows, want %d", got, want)
	}
	us := take()
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
