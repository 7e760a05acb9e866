package controller

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

const (
	envChildDir    = "AX_CTL_CHILD_DIR"
	envChildPort   = "AX_CTL_CHILD_PORT"
	envChildCreate = "AX_CTL_CHILD_CREATE"
)

// childConfig is the config of a controller helper process started by
// test parent: its data dir and NATS port from the environment variables
// dirEnv and portEnv (the test skips when dirEnv is unset: not a child).
func childConfig(t *testing.T, dirEnv, portEnv, parent string) Config {
	t.Helper()
	dir := testutil.ChildEnv(t, dirEnv, parent)
	port, _ := strconv.Atoi(os.Getenv(portEnv))
	cfg := DefaultConfig()
	cfg.DataDir, cfg.NATS.Port, cfg.AckWait = dir, port, time.Second
	return cfg
}

// TestHelperControllerProcess is not a test: TestKill9Restart runs the test
// binary again with it to get a controller in a process it can SIGKILL.
func TestHelperControllerProcess(t *testing.T) {
	cfg := childConfig(t, envChildDir, envChildPort, "TestKill9Restart")
	n, _ := strconv.Atoi(os.Getenv(envChildCreate))
	runChildController(cfg, n, func() protocol.Job { return retryJob("edge-1", 300*time.Millisecond) })
}

// runChildController runs a helper process's controller with cfg and,
// once it started, creates n jobs made by job; it then reports READY
// (testutil.RunChild).
func runChildController(cfg Config, n int, job func() protocol.Job) {
	testutil.RunChild(func(ctx context.Context) error {
		c, err := New(cfg)
		if err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		for range n {
			if _, err := c.CreateJob(ctx, job()); err != nil {
				return err
			}
		}
		return nil
	})
}

// startChild runs a controller process on dir and port and waits for READY.
func startChild(t *testing.T, dir string, port, create int) *testutil.Child {
	t.Helper()
	env := []string{envChildDir + "=" + dir, envChildPort + "=" + strconv.Itoa(port), envChildCreate + "=" + strconv.Itoa(create)}
	return testutil.StartChild(t, "TestHelperControllerProcess", env, 90*time.Second)
}

// publishUntilStored republishes a report with the same Msg-Id until the
// server acknowledges it, as the agent's outbox does across a server loss.
func (a *testAgent) publishUntilStored(r protocol.Report) {
	a.t.Helper()
	data, err := protocol.Encode(r)
	if err != nil {
		a.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := a.js.Publish(ctx, protocol.ReportSubject(protocol.Shard(r.JobID, a.shards), a.id), data, jetstream.WithMsgID(r.MsgID()))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("report %s not stored: %v", r.MsgID(), err)
		}
	}
}

// TestKill9Restart kills a real controller process (embedded server and
// all) with SIGKILL while executions wait in RETRY_WAITING and reports
// stream in, restarts it on the same data dir, and checks that no
// execution is lost, none is applied twice, and the retries fire.
func TestKill9Restart(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns controller processes")
	}
	dir, port := t.TempDir(), testutil.FreePort(t)
	child := startChild(t, dir, port, 3)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	a := newTestAgent(t, url, "edge-1", nil).start()
	var runs []*protocol.Run
	eventually(t, 20*time.Second, "3 run commands", func() bool {
		runs = nil
		for _, c := range a.commands() {
			if c.Kind == protocol.CmdRun && c.Run.Attempt == 1 {
				runs = append(runs, c.Run)
			}
		}
		return len(runs) == 3
	})
	// Base 300ms: the retries are due while the controller is dead.
	for _, r := range runs {
		a.runAttempt(r.Job.ID, r.ExecID, 1, r.RunAt, retry.OutcomeFailure, transient)
	}
	kv, err := a.js.KeyValue(tctx(t), protocol.BucketExecs)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id string) *execRecord {
		e, err := kv.Get(context.Background(), id)
		if err != nil {
			return nil
		}
		r, _ := decodeExec(e.Value())
		return r
	}
	for _, r := range runs {
		eventually(t, 20*time.Second, "RETRY_WAITING", func() bool {
			x := rec(r.ExecID)
			return x != nil && (x.State == protocol.StateRetryWaiting || x.State == protocol.StateTriggered)
		})
	}
	// Periodic fires of a job pinned to the agent stream in; the
	// controller is killed in the middle. (The job is written straight
	// into ax_jobs, as a replica would: the reports of a job that does not
	// exist are refused.)
	const fires = 90
	job := "ax-ctl-20261129120000-kill99"
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	jobs, err := a.js.KeyValue(tctx(t), protocol.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	spec := everyJob("edge-1", "1h")
	spec.ID, spec.CreatedAt, spec.Generation = job, base, 1
	data, err := json.Marshal(spec.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Create(tctx(t), job, data); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range fires {
		at := base.Add(time.Duration(i) * time.Second)
		id := protocol.ExecID(job, at)
		ids = append(ids, id)
		for _, rep := range []protocol.Report{
			a.rep(job, id, 1, protocol.ReportTriggered, at),
			a.rep(job, id, 1, protocol.ReportRunning, at),
			finished(a.rep(job, id, 1, protocol.ReportFinished, at), retry.OutcomeSuccess, ok, time.Millisecond),
		} {
			a.publishUntilStored(rep)
		}
		if i == fires/3 {
			child.Kill() // SIGKILL, and wait until it is gone
			startChild(t, dir, port, 0)
		}
	}
	// The agent re-registers after the reconnect, as ax-agent does.
	eventually(t, 60*time.Second, "re-registration", func() bool {
		a.mu.Lock()
		cursor := a.cursor
		a.mu.Unlock()
		_, err := a.tryRegister(cursor)
		return err == nil
	})
	for _, r := range runs {
		a.waitCommand("retry after kill", isRun(r.ExecID, 2))
		a.runAttempt(r.Job.ID, r.ExecID, 2, r.RunAt, retry.OutcomeSuccess, ok)
	}
	for _, r := range runs {
		eventually(t, 30*time.Second, r.ExecID+" SUCCESS", func() bool {
			x := rec(r.ExecID)
			return x != nil && x.State == protocol.StateSuccess && x.Attempt == 2 && len(x.Applied) == 3
		})
	}
	for _, id := range ids {
		eventually(t, 30*time.Second, id+" SUCCESS", func() bool {
			x := rec(id)
			return x != nil && x.State == protocol.StateSuccess && len(x.Applied) == 3
		})
	}
}
