package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestHeldPendingEvent: a one-shot create's PENDING event is held
// (eventhold.go). An execution whose agent reports within the hold gets no
// PENDING event: its one event starts from PENDING. An execution still
// PENDING after the hold (delayed an hour) gets its PENDING event without
// any list asking for it, and the create's write op ends once it is stored.
func TestHeldPendingEvent(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.heldTick = 3 * time.Second // the fast execution's report comes within the hold
	c := startController(t, cfg)
	ev := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)

	fast, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run", isRun(protocol.ExecID(fast.ID, fast.CreatedAt), 1)).Run
	a.publish(coalesced(finished(a.rep(fast.ID, run.ExecID, 1, protocol.ReportFinished, run.RunAt), retry.OutcomeSuccess, ok, time.Millisecond)), "")
	waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))

	later, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	laterID := protocol.ExecID(later.ID, later.CreatedAt.Add(time.Hour))
	// Published by the hold's loop, not by a list.
	eventually(t, 20*time.Second, "the delayed execution's PENDING event stored", func() bool {
		return storedEvent(t, c.js, protocol.StatePending, later.ID)
	})
	eventually(t, 10*time.Second, "no held event and no op open", func() bool {
		return c.evHold.n.Load() == 0 && c.marks.Mark().Open == 0
	})
	eventually(t, 10*time.Second, "both executions' events recorded", func() bool {
		return len(ev.Of(laterID)) == 1 && len(ev.Of(run.ExecID)) == 1
	})

	// The fast one: no PENDING event, had the report come within the hold;
	// its one event starts from PENDING either way.
	es := ev.Of(run.ExecID)
	if es[0].From != protocol.StatePending || es[0].To != protocol.StateSuccess {
		t.Errorf("event of %s: from %s to %s, want from PENDING to SUCCESS", run.ExecID, es[0].From, es[0].To)
	}
	if storedEvent(t, c.js, protocol.StatePending, fast.ID) {
		t.Errorf("PENDING event of %s, which moved on within the hold, stored; want none", run.ExecID)
	}
	if e := ev.Of(laterID)[0]; e.To != protocol.StatePending || e.Execution == nil || e.Execution.State != protocol.StatePending {
		t.Errorf("event of %s: %+v, want its PENDING event with the snapshot", laterID, e)
	}
}

// TestEventHoldLetsGoOfItsMapWhenDrained: once take has removed every
// held event, the hold holds no map (the buckets a burst grew are freed),
// and holds again after.
func TestEventHoldLetsGoOfItsMapWhenDrained(t *testing.T) {
	var h eventHold
	for i := range 1000 {
		rec := &execRecord{Execution: protocol.Execution{ExecID: fmt.Sprintf("e%d", i)}}
		h.hold(rec, transition{}, false, func(bool) {})
	}
	h.tick()
	if got := h.take(false); len(got) != 0 || h.held == nil {
		t.Fatalf("one tick after: took %d, map %v; want none taken, the map kept", len(got), h.held != nil)
	}
	h.tick()
	if got := h.take(false); len(got) != 1000 {
		t.Fatalf("two ticks after: took %d, want 1000", len(got))
	}
	if h.held != nil || h.n.Load() != 0 {
		t.Fatalf("drained: map kept (%d entries), n %d; want no map, n 0", len(h.held), h.n.Load())
	}
	h.hold(&execRecord{Execution: protocol.Execution{ExecID: "again"}}, transition{}, false, func(bool) {})
	if h.n.Load() != 1 || len(h.take(true)) != 1 {
		t.Fatal("the hold does not hold again after it was drained")
	}
}
