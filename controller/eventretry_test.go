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
	logs := &recordHandler{}
	_, c, a := onExternalServer(t, func(cfg *Config) { cfg.Logger = slog.New(logs) })
	ctx := tctx(t)
	a.register()
	// Two one-shots whose events share a partition: the first's RUNNING
	// event fills its subject.
	first, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	var j protocol.Job
	for range 1000 {
		if j, err = c.CreateJob(ctx, asapJob("edge-1")); err != nil {
			t.Fatal(err)
		}
		if protocol.EventStoredSubject(protocol.StateRunning, j.ID) == protocol.EventStoredSubject(protocol.StateRunning, first.ID) {
			break
		}
	}
	runOf := func(jobID string) *protocol.Run {
		return a.waitCommand("the run of "+jobID, func(cmd protocol.Command) bool {
			return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == jobID
		}).Run
	}
	running := func(run *protocol.Run) protocol.Report {
		r := a.rep(run.Job.ID, run.ExecID, 1, protocol.ReportRunning, run.RunAt)
		r.TriggeredAt = r.At.Add(-time.Millisecond)
		return r
	}
	r0, run := runOf(first.ID), runOf(j.ID)
	a.publish(running(r0), "")
	_, js := natstest.JetStream(t, c.NATSURL())
	eventually(t, 20*time.Second, "the first job's RUNNING event stored", func() bool {
		return storedEvent(t, js, protocol.StateRunning, first.ID)
	})
	if _, _, err := c.ListExecutions(ctx, ExecFilter{}); err != nil { // publishes the held PENDING events
		t.Fatal(err)
	}

	st, err := js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	orig := st.CachedInfo().Config
	limited := orig
	limited.MaxMsgsPerSubject, limited.Discard, limited.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	if _, err := js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	ev := natstest.WatchStoredEvents(t, c.NATSURL())
	a.publish(running(run), "")
	eventually(t, 20*time.Second, "the RUNNING event refused", func() bool {
		return logs.count("event of an applied report not stored") >= 1
	})
	a.publish(finished(a.rep(j.ID, run.ExecID, 1, protocol.ReportFinished, run.RunAt), retry.OutcomeSuccess, retry.Result{}, time.Millisecond), "")
	// Until the finished report's SUCCESS is stored (the bug), or the
	// lane has tried the RUNNING event three times.
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "the RUNNING event refused three times, or SUCCESS stored" }, func() bool {
		return logs.count("event of an applied report not stored") >= 3 || storedEvent(t, js, protocol.StateSuccess, j.ID)
	})
	if _, err := js.UpdateStream(ctx, orig); err != nil {
		t.Fatal(err)
	}
	waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	waitEventPath(t, ev, run.ExecID, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess)
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
