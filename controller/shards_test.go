package controller

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestReportsBeforeRegistration: an agent that never registered reports on
// protocol.DefaultShards shards; a controller configured with fewer still
// applies reports on the shard subjects above its count.
func TestReportsBeforeRegistration(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Shards = 2
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil) // not registered: a.shards = DefaultShards
	if a.shards != protocol.DefaultShards {
		t.Fatalf("agent shards %d", a.shards)
	}
	var job protocol.Job
	for range 100 {
		j, err := c.CreateJob(ctx, everyJob("edge-1", "1m"))
		if err != nil {
			t.Fatal(err)
		}
		if protocol.Shard(j.ID, protocol.DefaultShards) >= cfg.Shards {
			job = j
			break
		}
	}
	if job.ID == "" {
		t.Fatal("no job hashed to a shard above the configured count")
	}
	at := job.CreatedAt.Add(time.Minute)
	id := protocol.ExecID(job.ID, at)
	a.runAttempt(job.ID, id, 1, at, retry.OutcomeSuccess, ok)
	waitExec(t, c, id, "SUCCESS", inState(protocol.StateSuccess))
}

// TestRestartHoldsSentRetry: an execution in RETRY_WAITING whose next
// attempt's run command was sent but never reported has that run sent
// again by the next controller only when AX_CMD does not hold it (lost, as
// if the controller had died between the record and the command): AX_CMD
// keeps no de-duplication window, and an agent that had run the attempt
// and pruned it would run a copy. Either way the agent gets run 2 once and
// the attempt completes.
func TestRestartHoldsSentRetry(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose bool
	}{{"held", false}, {"lost", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, c1, a := onExternalServer(t, nil)
			ctx := tctx(t)
			job, err := c1.CreateJob(ctx, retryJob("edge-1", 20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			run := a.waitCommand("run 1", isRun("", 1)).Run
			a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeFailure, transient)
			a.waitCommand("run 2", isRun(run.ExecID, 2))
			if e, _ := c1.GetExecution(ctx, run.ExecID); e.State != protocol.StateRetryWaiting || e.Attempt != 1 {
				t.Fatalf("before restart: %+v", e)
			}
			if err := c1.Close(); err != nil {
				t.Fatal(err)
			}
			a.close()
			if tc.lose {
				deleteRunCommands(t, cfg.NATS.URL, run.ExecID, 2)
			}

			logs := &testutil.Buffer{}
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			cfg.Registry = nil
			c2 := startController(t, cfg)
			reload := waitLogRecord(t, 20*time.Second, logs, "executions reloaded", func(rec map[string]any) bool { return rec["retry_waiting"] == float64(1) })
			wantHeld, wantSent := float64(1), 0.0
			if tc.lose {
				wantHeld, wantSent = 0, 1
			}
			if reload["retries_sent_held"] != wantHeld {
				t.Errorf("reload %v: want retries_sent_held %v", reload, wantHeld)
			}
			b := newTestAgent(t, cfg.NATS.URL, "edge-1", nil).start()
			b.waitCommand("run 2 after restart", isRun(run.ExecID, 2))
			eventually(t, 10*time.Second, "the run commands published after the restart", func() bool {
				return testutil.MetricValue(t, c2.m.commands.WithLabelValues(string(protocol.CmdRun))) == wantSent
			})
			b.runAttempt(job.ID, run.ExecID, 2, run.RunAt, retry.OutcomeSuccess, ok)
			e := waitExec(t, c2, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
			if e.Attempt != 2 {
				t.Fatalf("attempt %d", e.Attempt)
			}
			if n := len(slices.DeleteFunc(b.commands(), func(c protocol.Command) bool { return !isRun(run.ExecID, 2)(c) })); n != 1 {
				t.Errorf("AX_CMD holds run 2 %d times, want once", n)
			}
		})
	}
}
