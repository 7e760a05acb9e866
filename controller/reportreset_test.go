package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestUnackedReportsBeforeLaterOnes: a controller died after it had
// pulled a report and written its record, before it published the event
// and acknowledged the report (here: the report is pulled by a plain
// client and the record written behind the controller's back). The agent
// reported the attempt's end after it. The next controller to work the
// shard must apply the two in stream order: the running report first (a
// duplicate: its event published again), then the finished one, so that
// AX_EVT holds the execution's transitions in the order of the state
// machine. Left to the ack wait (five minutes here) the running report
// came back only after the finished one had been applied: its event was
// missing until then, and stored after the SUCCESS.
func TestUnackedReportsBeforeLaterOnes(t *testing.T) {
	cfg, c, a := onExternalServer(t, func(cfg *Config) { cfg.AckWait = 5 * time.Minute })
	ctx := tctx(t)
	a.register()
	j, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("the one-shot's run", func(cmd protocol.Command) bool {
		return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == j.ID
	}).Run
	v, err := c.ex.readExec(ctx, run.ExecID) // stores a record the create held
	if err != nil || v.Rec == nil {
		t.Fatalf("read %s: %+v %v", run.ExecID, v.Rec, err)
	}
	cfg.Registry = nil
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// The dead controller's share: the running report (standing for the
	// triggered step) pulled and not acknowledged, its record written.
	started := time.Now()
	running := a.rep(j.ID, run.ExecID, 1, protocol.ReportRunning, run.RunAt)
	running.TriggeredAt = started.Add(-time.Millisecond)
	running.At = started
	a.publish(running, "")
	_, js := natstest.JetStream(t, cfg.NATS.URL)
	cons, err := js.Consumer(ctx, protocol.StreamReports, ingest.ConsumerName(protocol.Shard(j.ID, a.shards)))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var pulled int
	for m := range batch.Messages() {
		pulled++
		if r, err := protocol.DecodeReport(m.Data()); err != nil || r.ExecID != run.ExecID || r.Kind != protocol.ReportRunning {
			t.Fatalf("pulled %+v (%v), want the running report of %s", r, err, run.ExecID)
		}
	}
	if pulled != 1 {
		t.Fatalf("pulled %d reports (%v), want the running one", pulled, batch.Error())
	}
	next, _, err := execution.Apply(v.Rec, execution.Report{Report: running}, execution.Env{Now: time.Now()})
	if err != nil || next == nil || next.State != protocol.StateRunning {
		t.Fatalf("apply the running report: %+v %v", next, err)
	}
	data, err := json.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketExecs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, run.ExecID, data, v.Rev); err != nil {
		t.Fatal(err)
	}
	// The attempt's end, reported after it.
	a.publish(finished(a.rep(j.ID, run.ExecID, 1, protocol.ReportFinished, run.RunAt), retry.OutcomeSuccess, retry.Result{}, time.Millisecond), "")

	ev := natstest.WatchStoredEvents(t, cfg.NATS.URL)
	c = startController(t, cfg)
	waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	waitEventPath(t, ev, run.ExecID, protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess)
	if n := testutil.MetricValue(t, c.m.rptReset); n != 1 {
		t.Errorf("ax_report_consumers_reset_total = %v, want 1 (the shard's consumer, reset as its worker started)", n)
	}
}

// waitEventPath waits until the events ev recorded of execution execID,
// its PENDING ones left out, pass through want, in that order.
func waitEventPath(t *testing.T, ev *natstest.Events, execID string, want ...protocol.State) {
	t.Helper()
	var path []protocol.State
	testutil.EventuallyFunc(t, 20*time.Second, func() string {
		return fmt.Sprintf("the events of %s stored in the order %v; have %v", execID, want, path)
	}, func() bool {
		path = path[:0]
		for _, e := range ev.All() {
			if e.ExecID == execID && e.To != protocol.StatePending {
				path = append(path, e.Path()...)
			}
		}
		return slices.Equal(path, want)
	})
}
