package controller

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestEventStoredBeforeLaterReports: AX_EVT refuses the event of an
// applied report (here: a per-subject limit of one message, reached on
// the RUNNING subject of the job's partition and not on its SUCCESS one),
// and the attempt's finished report comes after the refusal. The lane
// must publish the refused event again until it is stored before it
// applies the finished report, so that AX_EVT holds RUNNING before
// SUCCESS. A report redelivered for its event instead (a second later)
// came back after the finished one had been applied and its SUCCESS
// stored: RUNNING came after it.
func TestEventStoredBeforeLaterReports(t *testing.T) {
	f := refuseRunningEvent(t)
	f.a.publish(f.running(), "")
	eventually(t, 20*time.Second, "the RUNNING event refused", func() bool {
		return f.logs.count("event of an applied report not stored") >= 1
	})
	f.a.publish(f.finished(), "")
	f.check(t)
}

// TestEventsOfOneWriteInOrder: the running and finished reports of an
// attempt come together and are applied in one write, and AX_EVT refuses
// the RUNNING event (as in TestEventStoredBeforeLaterReports) but would
// take the SUCCESS one. The lane must not publish SUCCESS until RUNNING
// is stored; published together, SUCCESS was stored first.
func TestEventsOfOneWriteInOrder(t *testing.T) {
	f := refuseRunningEvent(t)
	f.a.publish(f.running(), "")
	f.a.publish(f.finished(), "")
	f.check(t)
}

// eventRefusal is a one-shot's run whose RUNNING event AX_EVT refuses
// (a per-subject limit of one message, reached on the RUNNING subject of
// the job's partition by another job, and not on its SUCCESS one).
type eventRefusal struct {
	c    *Controller
	a    *testAgent
	js   jetstream.JetStream
	logs *recordHandler
	run  *protocol.Run
	orig jetstream.StreamConfig
	ev   *natstest.Events
}

func refuseRunningEvent(t *testing.T) *eventRefusal {
	t.Helper()
	f := &eventRefusal{logs: &recordHandler{}}
	_, f.c, f.a = onExternalServer(t, func(cfg *Config) { cfg.Logger = slog.New(f.logs) })
	ctx := tctx(t)
	f.a.register()
	// Two one-shots whose events share a partition: the first's RUNNING
	// event fills its subject.
	first, err := f.c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	var j protocol.Job
	for range 1000 {
		if j, err = f.c.CreateJob(ctx, asapJob("edge-1")); err != nil {
			t.Fatal(err)
		}
		if protocol.EventStoredSubject(protocol.StateRunning, j.ID) == protocol.EventStoredSubject(protocol.StateRunning, first.ID) {
			break
		}
	}
	runOf := func(jobID string) *protocol.Run {
		return f.a.waitCommand("the run of "+jobID, func(cmd protocol.Command) bool {
			return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == jobID
		}).Run
	}
	r0 := runOf(first.ID)
	f.run = runOf(j.ID)
	f.a.publish(runningReport(f.a, r0), "")
	_, f.js = natstest.JetStream(t, f.c.NATSURL())
	eventually(t, 20*time.Second, "the first job's RUNNING event stored", func() bool {
		return storedEvent(t, f.js, protocol.StateRunning, first.ID)
	})
	if _, _, err := f.c.ListExecutions(ctx, ExecFilter{}); err != nil { // publishes the held PENDING events
		t.Fatal(err)
	}
	st, err := f.js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	f.orig = st.CachedInfo().Config
	limited := f.orig
	limited.MaxMsgsPerSubject, limited.Discard, limited.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	if _, err := f.js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	f.ev = natstest.WatchStoredEvents(t, f.c.NATSURL())
	return f
}

func runningReport(a *testAgent, run *protocol.Run) protocol.Report {
	r := a.rep(run.Job.ID, run.ExecID, 1, protocol.ReportRunning, run.RunAt)
	r.TriggeredAt = r.At.Add(-time.Millisecond)
	return r
}

func (f *eventRefusal) running() protocol.Report { return runningReport(f.a, f.run) }

func (f *eventRefusal) finished() protocol.Report {
	return finished(f.a.rep(f.run.Job.ID, f.run.ExecID, 1, protocol.ReportFinished, f.run.RunAt), retry.OutcomeSuccess, retry.Result{}, time.Millisecond)
}

// check waits until the SUCCESS event is stored (the bug) or the lane has
// tried the RUNNING event three times, lifts the limit, and asserts the
// execution's events in order.
func (f *eventRefusal) check(t *testing.T) {
	t.Helper()
	ctx := tctx(t)
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "the RUNNING event refused three times, or SUCCESS stored" }, func() bool {
		return f.logs.count("event of an applied report not stored") >= 3 || storedEvent(t, f.js, protocol.StateSuccess, f.run.Job.ID)
	})
	if _, err := f.js.UpdateStream(ctx, f.orig); err != nil {
		t.Fatal(err)
	}
	waitExec(t, f.c, f.run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	waitEventPath(t, f.ev, f.run.ExecID, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess)
}

// count returns how many records logged so far have a message containing s.
func (h *recordHandler) count(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if strings.Contains(r.Message, s) {
			n++
		}
	}
	return n
}
