package controller

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestSuccessWritesTwoRevisions: a one-shot execution that succeeds, its
// triggered, running and finished reports sent one after another as
// separate messages (each acknowledged by the stream before the next is
// sent, as an agent's outbox does when they fall in different windows),
// is written twice to ax_execs: created PENDING, then SUCCESS. Every
// transition is still an event in AX_EVT.
func TestSuccessWritesTwoRevisions(t *testing.T) {
	c := newTestController(t)
	er := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)

	j, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	execID := protocol.ExecID(j.ID, j.CreatedAt)
	w, err := c.kv.Execs.Watch(ctx, execID)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	var puts atomic.Int64
	var last atomic.Value
	go func() {
		for e := range w.Updates() {
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				puts.Add(1)
				last.Store(e.Revision())
			}
		}
	}()
	eventually(t, 10*time.Second, "the PENDING record in the watch", func() bool { return puts.Load() == 1 })

	a.waitCommand("run", isRun(execID, 1))
	a.runAttempt(j.ID, execID, 1, j.CreatedAt, retry.OutcomeSuccess, retry.Result{})
	waitExec(t, c, execID, "SUCCESS", inState(protocol.StateSuccess))
	v, err := c.ex.readExec(ctx, execID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the watch at the last revision", func() bool { r, _ := last.Load().(uint64); return r == v.Rev })
	if n := puts.Load(); n != 2 {
		t.Errorf("ax_execs revisions of %s: %d, want 2 (PENDING, SUCCESS)", execID, n)
	}
	want := []protocol.State{protocol.StatePending, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess}
	eventually(t, 10*time.Second, "the four events", func() bool { return slices.Equal(er.Path(execID), want) })
}
