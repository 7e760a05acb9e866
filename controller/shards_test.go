package controller

import (
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

// TestRestartResendsRetryRun: an execution in RETRY_WAITING whose next
// attempt's run command was sent but never reported gets that run command
// sent again by the next controller (same Msg-Id and run; the agent
// applies it once), and the attempt then completes.
func TestRestartResendsRetryRun(t *testing.T) {
	dir := t.TempDir()
	c1 := startController(t, testConfig(t, dir))
	ctx := tctx(t)
	a := newTestAgent(t, c1.NATSURL(), "edge-1", nil).start()
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

	c2 := startController(t, testConfig(t, dir))
	eventually(t, 10*time.Second, "run re-sent by the new controller", func() bool {
		return testutil.MetricValue(t, c2.m.commands.WithLabelValues(string(protocol.CmdRun))) >= 1
	})
	b := newTestAgent(t, c2.NATSURL(), "edge-1", nil).start()
	b.waitCommand("run 2 after restart", isRun(run.ExecID, 2))
	// AX_CMD keeps the server's least de-duplication window
	// (streams.CommandDuplicates): the copy is stored unless it came
	// within it, and the agent stores the attempt once either way
	// (agent.TestRunCommandStoredTwiceRunsOnce). Every copy is the same run.
	copies := slices.DeleteFunc(b.commands(), func(c protocol.Command) bool { return !isRun(run.ExecID, 2)(c) })
	for _, cmd := range copies {
		if cmd.Agent != "edge-1" || !cmd.Run.RunAt.Equal(copies[0].Run.RunAt) || cmd.Run.Job.ID != job.ID || cmd.Run.Epoch != copies[0].Run.Epoch {
			t.Fatalf("a copy of run 2 differs: %+v, first %+v", cmd.Run, copies[0].Run)
		}
	}
	b.runAttempt(job.ID, run.ExecID, 2, run.RunAt, retry.OutcomeSuccess, ok)
	e := waitExec(t, c2, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	if e.Attempt != 2 {
		t.Fatalf("attempt %d", e.Attempt)
	}
}
