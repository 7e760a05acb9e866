package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// takeUnits takes the units handed to workers so far (the offline
// scheduler runs none).
func takeUnits(r *runQueue) []workUnit {
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

// idleOffline is an offline scheduler (4 workers) that has pumped once,
// as its loop does, so its idle workers are offered.
func idleOffline(t *testing.T, id string) (*offline, *runQueue, time.Time) {
	t.Helper()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, id), start)
	o.s.runs.pump()
	return o, o.s.runs, start
}

// runOf is an asap run command of one-shot job j, due at start.
func runOf(j protocol.Job, start time.Time) protocol.Command {
	return protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: protocol.ExecID(j.ID, start), Attempt: 1, RunAt: start}}
}

// reportKinds returns the kinds of the reports in the outbox for execID.
func reportKinds(t *testing.T, o *offline, execID string) []protocol.ReportKind {
	t.Helper()
	var out []protocol.ReportKind
	for _, r := range outboxReports(t, o, func(r protocol.Report) bool { return r.ExecID == execID }) {
		out = append(out, r.Kind)
	}
	return out
}

// startsAtOnce applies a due run of a new one-shot job of agent and fails
// unless the command's one commit stored it RUNNING, started at start; it
// returns the run's exec id.
func startsAtOnce(t *testing.T, o *offline, agent string, start time.Time, what string) string {
	t.Helper()
	j := protocoltest.NewJob(agent, "noop", schedule.Spec{Asap: true}, nil)
	x := protocol.ExecID(j.ID, start)
	before := o.st.Stats().Commits
	o.apply(runOf(j, start))
	if got := o.st.Stats().Commits - before; got != 1 {
		t.Fatalf("%s: %d commits from command to worker, want 1", what, got)
	}
	e, ok := o.row(x)
	if !ok || e.State != store.StateRunning || !e.StartedAt.Equal(start) || !e.TriggeredAt.Equal(start) {
		t.Fatalf("%s: row %+v (found %v), want RUNNING, triggered and started at %s", what, e, ok, start)
	}
	return x
}

// takesQueue applies a due run of a new one-shot job of agent, lets the
// scheduler pass, and fails unless the run is stored TRIGGERED: it waits
// in the queue. It returns the run's exec id.
func takesQueue(t *testing.T, o *offline, agent string, start time.Time, what string) string {
	t.Helper()
	j := protocoltest.NewJob(agent, "noop", schedule.Spec{Asap: true}, nil)
	x := protocol.ExecID(j.ID, start)
	o.apply(runOf(j, start))
	o.s.runs.pump()
	o.sync()
	if e, _ := o.row(x); e.State != store.StateTriggered {
		t.Fatalf("%s: %s, want TRIGGERED", what, e.State)
	}
	return x
}

// TestDueRunStartsOnFreeWorker (directstart.go): a due run of a one-shot
// job that arrives while workers are free is stored RUNNING, with its
// running report, in the command's own commit, and handed to a worker
// with no write of the scheduler's: one commit from command to handler
// instead of two. Once the free workers are taken, a run is stored
// TRIGGERED and waits in the queue, and nothing is offered while it waits.
func TestDueRunStartsOnFreeWorker(t *testing.T) {
	o, r, start := idleOffline(t, "edge-d")
	cfg := o.cfg

	for i := range cfg.Workers {
		x := startsAtOnce(t, o, "edge-d", start, fmt.Sprintf("run %d", i))
		if got := reportKinds(t, o, x); len(got) != 1 || got[0] != protocol.ReportRunning {
			t.Fatalf("run %d: reports %v, want one running report", i, got)
		}
		us := takeUnits(r)
		if len(us) != 1 || us[0].it.row.ExecID != x || us[0].it.spec == nil {
			t.Fatalf("run %d: %d units handed to workers, want its own with its spec", i, len(us))
		}
	}
	if r.busy != cfg.Workers {
		t.Fatalf("busy %d, want %d", r.busy, cfg.Workers)
	}

	// Every worker taken: the next run takes the queue.
	x := takesQueue(t, o, "edge-d", start, "run with every worker busy")
	if r.ready.len() != 1 || r.claimsOut != 0 || r.offered != 0 || o.s.env.slots.n.Load() != 0 {
		t.Fatalf("ready %d, claimsOut %d, offered %d, offer %d; want 1, 0, 0, 0",
			r.ready.len(), r.claimsOut, r.offered, o.s.env.slots.n.Load())
	}

	// A worker frees: the queued attempt goes first, through the RUNNING
	// write, and nothing is offered while it waits for that write.
	o.s.handle(slotFreed{dur: 50 * time.Millisecond}) // long: no prefetch
	r.pump()
	if r.offered != 0 {
		t.Fatalf("offered %d while the queued attempt's RUNNING write is in flight", r.offered)
	}
	o.sync()
	if e, _ := o.row(x); e.State != store.StateRunning {
		t.Fatalf("queued run after a worker freed: %s, want RUNNING", e.State)
	}
	if us := takeUnits(r); len(us) != 1 || us[0].it.row.ExecID != x {
		t.Fatalf("%d units, want the queued run's", len(us))
	}
}

// TestDirectStartUsesPrefetchRoom: while handlers are short, the room the
// prefetch gives pump counts for direct starts too, so a run arriving
// with every worker busy is still stored RUNNING in its command's commit
// and waits in the work channel for the first worker that frees, as a
// prefetched attempt does; once that room is taken, runs take the queue.
func TestDirectStartUsesPrefetchRoom(t *testing.T) {
	o, r, start := idleOffline(t, "edge-p")
	workers := o.cfg.Workers
	r.handlerAvg = time.Millisecond // short handlers, no write measured: k = 1
	room := workers + r.prefetch()
	if room != 2*workers {
		t.Fatalf("limit %d with short handlers, want %d", room, 2*workers)
	}
	r.pump()
	if r.offered != room {
		t.Fatalf("offered %d, want the workers and the prefetch, %d", r.offered, room)
	}
	for i := range room {
		startsAtOnce(t, o, "edge-p", start, fmt.Sprintf("run %d (busy %d of %d workers)", i, r.busy, workers))
	}
	if r.busy != room || len(takeUnits(r)) != room {
		t.Fatalf("busy %d, want %d, each handed to the work channel", r.busy, room)
	}
	takesQueue(t, o, "edge-p", start, "run past the prefetch's room")
}

// TestDirectStartGivesBackUnusedSlot: a slot taken by a command that does
// not use it (the same run again, already stored) is given back, and a
// periodic job's run never takes one (its job's concurrency is the
// queue's to apply).
func TestDirectStartGivesBackUnusedSlot(t *testing.T) {
	o, r, start := idleOffline(t, "edge-g")
	cfg := o.cfg

	j := protocoltest.NewJob("edge-g", "noop", schedule.Spec{Asap: true}, nil)
	o.apply(runOf(j, start))
	o.apply(runOf(j, start)) // a command stored twice: the attempt is stored once
	r.pump()
	if us := takeUnits(r); len(us) != 1 {
		t.Fatalf("%d units for one attempt sent twice, want 1", len(us))
	}
	if r.busy != 1 || r.claimsOut != 0 || r.offered != cfg.Workers-1 {
		t.Fatalf("busy %d, claimsOut %d, offered %d; want 1, 0, %d", r.busy, r.claimsOut, r.offered, cfg.Workers-1)
	}

	p := protocoltest.NewJob("edge-g", "noop", schedule.Spec{Every: "1h"}, nil)
	px := protocol.ExecID(p.ID, start)
	o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: p, ExecID: px, Attempt: 2, RunAt: start}})
	if e, err := o.st.ExecByID(context.Background(), px, 2); err != nil || e.State != store.StateTriggered {
		t.Fatalf("periodic job's run: %+v, %v; want TRIGGERED (through the queue)", e, err)
	}
}

// TestDirectStartCancelledBeforeWorker: a cancel that comes after a run
// stored RUNNING on a slot, before a worker took it, cancels the unit's
// context, so the worker does not run it (worker.runOne).
func TestDirectStartCancelledBeforeWorker(t *testing.T) {
	o, r, start := idleOffline(t, "edge-c")
	j := protocoltest.NewJob("edge-c", "noop", schedule.Spec{Asap: true}, nil)
	o.apply(runOf(j, start))
	o.apply(protocol.Command{Kind: protocol.CmdCancel, Cancel: &protocol.Cancel{ExecID: protocol.ExecID(j.ID, start)}})
	us := takeUnits(r)
	if len(us) != 1 {
		t.Fatalf("%d units, want 1", len(us))
	}
	if us[0].ctx.Err() == nil {
		t.Fatal("the unit's context is not cancelled after the cancel command")
	}
}

// TestStopWaitsForDirectStarts: a stop reclaims the slots offered, so no
// command takes a worker after it, and counts out those taken before it.
func TestStopWaitsForDirectStarts(t *testing.T) {
	o, r, _ := idleOffline(t, "edge-s")
	if !o.s.env.slots.take() {
		t.Fatal("no slot offered to take")
	}
	r.stopped = true
	r.reclaimSlots()
	if o.s.env.slots.take() {
		t.Fatal("a slot was taken after the stop")
	}
	if r.claimsOut != 1 {
		t.Fatalf("claimsOut %d after the stop, want the one taken before it", r.claimsOut)
	}
}
