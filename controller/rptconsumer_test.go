package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestReportConsumerDeletedIsRecreated deletes every report consumer of
// AX_RPT under a running controller that works every shard (an
// operator's mistake, or a NATS cluster that lost its consumers) and
// checks that each shard worker makes its consumer again, counted in
// ax_report_consumers_remade_total, and that the reports of an attempt
// made after it are applied. Before, the workers' iterators ended and the
// reports waited for a restart.
func TestReportConsumerDeletedIsRecreated(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	c := startController(t, cfg)
	ctx := tctx(t)
	eventually(t, 20*time.Second, "every shard owned", func() bool { return len(c.own.OwnedShards()) == cfg.Shards })
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	js := clientJS(t, c.NATSURL())
	for n := range protocol.DefaultShards {
		if err := js.DeleteConsumer(ctx, protocol.StreamReports, ingest.ConsumerName(n)); err != nil {
			t.Fatalf("delete consumer %d: %v", n, err)
		}
	}
	eventually(t, 20*time.Second, "every report consumer made again", func() bool {
		return testutil.MetricValue(t, c.m.rptRemade) == float64(cfg.Shards)
	})
	j, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	execID := protocol.ExecID(j.ID, j.CreatedAt)
	a.waitCommand("run of "+execID, isRun(execID, 1))
	a.runAttempt(j.ID, execID, 1, j.CreatedAt, retry.OutcomeSuccess, retry.Result{})
	waitExec(t, c, execID, "SUCCESS", inState(protocol.StateSuccess))
}

// TestReportConsumersLostWithServerRestart restarts the external NATS
// server under a running controller. The report consumers keep their state
// in memory, so the restarted server has none: each shard worker makes its
// consumer again (ax_report_consumers_remade_total), and the report of an
// attempt made after the restart is applied.
func TestReportConsumersLostWithServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	cfg := testConfig(t, "")
	cfg.NATS.URL = srv.URL()
	c := startController(t, cfg)
	ctx := tctx(t)
	eventually(t, 20*time.Second, "every shard owned", func() bool { return len(c.own.OwnedShards()) == cfg.Shards })
	a := newTestAgent(t, srv.URL(), "edge-1", nil).start()
	run := func(what string) {
		t.Helper()
		j, err := c.CreateJob(ctx, asapJob("edge-1"))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		execID := protocol.ExecID(j.ID, j.CreatedAt)
		a.waitCommand(what+": run of "+execID, isRun(execID, 1))
		a.runAttempt(j.ID, execID, 1, j.CreatedAt, retry.OutcomeSuccess, retry.Result{})
		waitExec(t, c, execID, "SUCCESS", inState(protocol.StateSuccess))
	}
	run("before the restart")

	srv.Restart()
	js := clientJS(t, srv.URL())
	if _, err := js.Consumer(ctx, protocol.StreamReports, ingest.ConsumerName(0)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("report consumer 0 right after the server's restart: %v, want not found", err)
	}
	eventually(t, 60*time.Second, "every report consumer made again", func() bool {
		return testutil.MetricValue(t, c.m.rptRemade) >= float64(cfg.Shards)
	})
	run("after the restart")
}
