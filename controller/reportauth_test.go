package controller

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// waitRejected waits until ax_reports_rejected_total{reason} reached want.
func waitRejected(t *testing.T, c *Controller, reason string, want float64) {
	t.Helper()
	eventually(t, 20*time.Second, "reports rejected "+reason+" ≥ "+strconv.FormatFloat(want, 'f', 0, 64), func() bool {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(reason)) >= want
	})
}

// noExec fails when execID has a record.
func noExec(t *testing.T, c *Controller, execID, what string) {
	t.Helper()
	if e, err := c.GetExecution(tctx(t), execID); err == nil {
		t.Fatalf("%s: a forged report made execution %+v", what, e)
	}
}

// publishOn publishes a report of a on subject (its own allowed subjects).
func (a *testAgent) publishOn(subject string, r protocol.Report) {
	a.t.Helper()
	data, err := protocol.Encode(r)
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.js.Publish(ctx, subject, data, jetstream.WithMsgID(r.MsgID()+"@"+subject)); err != nil {
		a.t.Fatalf("publish on %s: %v", subject, err)
	}
}

// TestForgedReportsRejected: an enrolled agent (edge-m, its own NKey
// identity on the controller's embedded nats-server) publishes, on its
// own report subject, reports the controller never asked it for. Each is
// rejected with its reason, counted, and changes nothing; the real
// agents' runs of the same executions apply as if nothing happened.
func TestForgedReportsRejected(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS.Auth = auth.ModeNKeys
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 3 * time.Second
	cfg.LeaseTTL = time.Second
	cfg.LeaseRenewInterval = 200 * time.Millisecond
	cfg.reportSweep = 100 * time.Millisecond
	c := startController(t, cfg)
	ctx := tctx(t)
	b := newEnrolledAgent(t, c, "edge-b", map[string]string{"site": "b"}).start()
	m := newEnrolledAgent(t, c, "edge-m", map[string]string{"site": "m"}).start()
	rejected := func(reason string) float64 {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(reason))
	}

	t.Run("next fire of another agent's pinned job", func(t *testing.T) {
		j, err := c.CreateJob(ctx, everyJob("edge-b", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		at := j.CreatedAt.Add(time.Hour).Truncate(time.Millisecond)
		x := protocol.ExecID(j.ID, at)
		n := rejected(ingest.RejectNotAssigned)
		// With the Msg-Id the report would have without ax-agent's salt.
		forged := m.rep(j.ID, x, 1, protocol.ReportTriggered, at)
		m.publish(forged, forged.MsgID())
		waitRejected(t, c, ingest.RejectNotAssigned, n+1)
		noExec(t, c, x, "edge-m's fire of edge-b's pinned job")
		b.runAttempt(j.ID, x, 1, at, retry.OutcomeSuccess, ok)
		if e := waitExec(t, c, x, "SUCCESS by edge-b", inState(protocol.StateSuccess)); e.Agent != "edge-b" {
			t.Fatalf("edge-b's run recorded as %+v", e)
		}
	})

	t.Run("fire made before its job was deleted", func(t *testing.T) {
		j, err := c.CreateJob(ctx, everyJob("edge-b", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		// In flight at the delete: it ran, so it is recorded.
		at := j.CreatedAt.Truncate(time.Millisecond)
		x := protocol.ExecID(j.ID, at)
		b.runAttempt(j.ID, x, 1, at, retry.OutcomeSuccess, ok)
		waitExec(t, c, x, "SUCCESS of the fire made before the delete", inState(protocol.StateSuccess))
		// Scheduled an hour after the delete: refused.
		later := at.Add(time.Hour)
		y := protocol.ExecID(j.ID, later)
		n := rejected(ingest.RejectUnknownJob)
		b.publish(b.rep(j.ID, y, 1, protocol.ReportTriggered, later), "")
		waitRejected(t, c, ingest.RejectUnknownJob, n+1)
		noExec(t, c, y, "a fire scheduled after its job was deleted")
	})

	t.Run("fire of a job that does not exist", func(t *testing.T) {
		ghost := protocol.NewJobID("ctl", time.Now(), 424242)
		x := protocol.ExecID(ghost, time.Now().Truncate(time.Millisecond))
		n := rejected(ingest.RejectUnknownJob)
		m.publish(m.rep(ghost, x, 1, protocol.ReportTriggered, time.Now()), "")
		waitRejected(t, c, ingest.RejectUnknownJob, n+1)
		noExec(t, c, x, "a fire of a job that does not exist")
	})

	t.Run("unplaced execution of a group it is not in", func(t *testing.T) {
		j, err := c.CreateJob(ctx, protocol.Job{Name: "nowhere", Handler: "noop", Schedule: schedule.Spec{Asap: true},
			Target: protocol.Target{Group: "site=nowhere"}})
		if err != nil {
			t.Fatal(err)
		}
		var x string
		eventually(t, 10*time.Second, "the PENDING execution without an agent", func() bool {
			es, _, err := c.ListExecutions(ctx, ExecFilter{JobID: j.ID})
			if err == nil && len(es) == 1 && es[0].State == protocol.StatePending && es[0].Agent == "" {
				x = es[0].ExecID
			}
			return x != ""
		})
		n := rejected(ingest.RejectWrongAgent)
		m.publish(m.rep(j.ID, x, 1, protocol.ReportTriggered, j.CreatedAt), "")
		m.publish(finished(m.rep(j.ID, x, 1, protocol.ReportFinished, j.CreatedAt), retry.OutcomeSuccess, ok, time.Millisecond), "")
		waitRejected(t, c, ingest.RejectWrongAgent, n+2)
		if e, err := c.GetExecution(ctx, x); err != nil || e.State != protocol.StatePending || e.Agent != "" {
			t.Fatalf("unplaced execution after forged reports: %+v, %v", e, err)
		}
	})

	t.Run("next attempt of another agent's retry", func(t *testing.T) {
		j, err := c.CreateJob(ctx, retryJob("edge-b", 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		run := b.waitCommand("attempt 1", func(cmd protocol.Command) bool { return isRun("", 1)(cmd) && cmd.Run.Job.ID == j.ID })
		x := run.Run.ExecID
		b.runAttempt(j.ID, x, 1, run.Run.RunAt, retry.OutcomeFailure, transient)
		b.waitCommand("attempt 2 sent to edge-b", isRun(x, 2))
		n := rejected(ingest.RejectWrongAgent)
		m.runAttempt(j.ID, x, 2, run.Run.RunAt, retry.OutcomeSuccess, ok)
		waitRejected(t, c, ingest.RejectWrongAgent, n+1)
		eventually(t, 10*time.Second, "edge-m's three reports handled", func() bool { return rejected(ingest.RejectWrongAgent)+rejected(ingest.RejectFuture) >= n+3 })
		if e, err := c.GetExecution(ctx, x); err != nil || e.State != protocol.StateRetryWaiting || e.Attempt != 1 || e.Agent != "edge-b" {
			t.Fatalf("edge-b's retry after edge-m's forged attempt 2: %+v, %v", e, err)
		}
		b.runAttempt(j.ID, x, 2, run.Run.RunAt, retry.OutcomeSuccess, ok)
		if e := waitExec(t, c, x, "SUCCESS at attempt 2 by edge-b", inState(protocol.StateSuccess)); e.Agent != "edge-b" || e.Attempt != 2 {
			t.Fatalf("edge-b's attempt 2 recorded as %+v", e)
		}
	})

	t.Run("fire under another agent's group lease epoch", func(t *testing.T) {
		j, err := c.CreateJob(ctx, protocol.Job{Name: "pump", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
			Target: protocol.Target{Group: "site=b"}})
		if err != nil {
			t.Fatal(err)
		}
		var epoch uint64
		eventually(t, 20*time.Second, "edge-b holds the group job's lease", func() bool {
			b.heartbeat() // a lease goes to a live member
			for _, cmd := range b.commands() {
				if assignWithEpoch(j.ID, 0)(cmd) {
					epoch = cmd.Assign.Epoch
					return true
				}
			}
			return false
		})
		at := time.Now().Truncate(time.Millisecond)
		x := protocol.ExecID(j.ID, at)
		n := rejected(ingest.RejectNotAssigned)
		for _, e := range []uint64{epoch, epoch + 1000} {
			r := m.rep(j.ID, x, 1, protocol.ReportTriggered, at)
			r.Epoch = e
			m.publish(r, r.MsgID()+"/"+strconv.FormatUint(e, 10))
		}
		waitRejected(t, c, ingest.RejectNotAssigned, n+2)
		noExec(t, c, x, "edge-m's fire under edge-b's epoch")
	})

	t.Run("fire of a broadcast group it is not in", func(t *testing.T) {
		j, err := c.CreateJob(ctx, protocol.Job{Name: "all-b", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
			Target: protocol.Target{Group: "site=b", Mode: protocol.ModeAll}})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Truncate(time.Millisecond)
		x := protocol.BroadcastExecID(j.ID, at, 1)
		r := m.rep(j.ID, x, 1, protocol.ReportTriggered, at)
		r.Shard = &protocol.ShardSlot{Index: 1, Total: 2}
		n := rejected(ingest.RejectNotAssigned)
		m.publish(r, "")
		waitRejected(t, c, ingest.RejectNotAssigned, n+1)
		noExec(t, c, x, "edge-m's fire of a broadcast group it is not in")
	})

	t.Run("reports on shard tokens that are not the job's", func(t *testing.T) {
		j, err := c.CreateJob(ctx, everyJob("edge-m", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		at := j.CreatedAt.Add(time.Hour).Truncate(time.Millisecond)
		x := protocol.ExecID(j.ID, at)
		r := m.rep(j.ID, x, 1, protocol.ReportTriggered, at)
		n := rejected(ingest.RejectBadShard)
		other := (protocol.Shard(j.ID, cfg.Shards) + 1) % cfg.Shards
		// A token a consumer reads, but not the job's shard: refused when read.
		m.publishOn(protocol.ReportSubject(other, "edge-m"), r)
		// Tokens no consumer reads: AX_RPT does not take them, so the
		// publish is refused and nothing is stored.
		for _, tok := range []string{strconv.Itoa(protocol.MaxShards - 1), "99999", "x"} {
			data, err := protocol.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = m.js.Publish(pctx, "ax.rpt."+tok+".edge-m", data)
			cancel()
			if !errors.Is(err, jetstream.ErrNoStreamResponse) {
				t.Fatalf("report on token %s: %v, want no stream (stored nowhere)", tok, err)
			}
		}
		waitRejected(t, c, ingest.RejectBadShard, n+1)
		eventually(t, 10*time.Second, "AX_RPT empty again", func() bool {
			st, err := c.js.Stream(ctx, protocol.StreamReports)
			return err == nil && st.CachedInfo().State.Msgs == 0
		})
		noExec(t, c, x, "reports on the wrong shard tokens")
		// On its own shard, the same report applies: edge-m runs that job.
		m.publish(r, "")
		waitExec(t, c, x, "TRIGGERED by edge-m", inState(protocol.StateTriggered))
	})
}

// TestSkippedCountBoundedBySchedule: a coalesced skipped report may claim
// at most the fires its job's schedule has between first_scheduled_at and
// scheduled_at; one claiming more (an agent inflating
// ax_executions_total) is rejected invalid and makes no record, and one
// within the bound is recorded with its count.
func TestSkippedCountBoundedBySchedule(t *testing.T) {
	c := startController(t, testConfig(t, t.TempDir()))
	a := newTestAgent(t, c.NATSURL(), "edge-s", nil)
	a.register()
	j, err := c.CreateJob(tctx(t), everyJob("edge-s", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	first := j.CreatedAt.Add(time.Second).Truncate(time.Millisecond)
	last := first.Add(9 * time.Second) // 10 fires at most
	skipped := func(count int) protocol.Report {
		r := a.rep(j.ID, protocol.ExecID(j.ID, last), 1, protocol.ReportSkipped, last)
		r.Reason, r.SkippedCount, r.FirstScheduledAt = "overlap", count, first
		return r
	}
	n := testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectInvalid))
	inflated := skipped(1_000_000)
	a.publish(inflated, inflated.MsgID()+"-inflated")
	waitRejected(t, c, ingest.RejectInvalid, n+1)
	noExec(t, c, inflated.ExecID, "a skipped report claiming 1,000,000 fires in 10 s")

	ok := skipped(10)
	a.publish(ok, ok.MsgID())
	e := waitExec(t, c, ok.ExecID, "SKIPPED with its count", inState(protocol.StateSkipped))
	if e.SkippedCount != 10 {
		t.Fatalf("skipped_count %d, want 10", e.SkippedCount)
	}
}
