package controller

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

const (
	envNoDispatchDir  = "AX_CTL_NODISPATCH_DIR"
	envNoDispatchPort = "AX_CTL_NODISPATCH_PORT"
)

// TestHelperControllerNoDispatch is not a test: TestKill9BeforeAssign runs
// the test binary again with it to get a controller that stores a periodic
// job and is killed before the job's assign goes out (the dispatch blocks
// on a hook until the kill).
func TestHelperControllerNoDispatch(t *testing.T) {
	cfg := childConfig(t, envNoDispatchDir, envNoDispatchPort, "TestKill9BeforeAssign")
	testutil.RunChild(func(ctx context.Context) error {
		c, err := New(cfg)
		if err != nil {
			return err
		}
		c.hooks.beforeJobDispatch = func() { select {} } // killed here
		if err := c.Start(ctx); err != nil {
			return err
		}
		// SIGUSR1 from the parent (its agent registered): create the job.
		create := make(chan os.Signal, 1)
		signal.Notify(create, syscall.SIGUSR1)
		go func() {
			<-create
			if _, err := c.CreateJob(context.Background(), everyJob("edge-1", "1h")); err != nil {
				testutil.ChildFail(err)
			}
		}()
		return nil
	})
}

// TestKill9BeforeAssign: a controller killed (SIGKILL) after it stored a
// new periodic job and before it sent the job's assign command: the
// restarted controller's reload sends the assign (the job changed after
// the dead process's write mark), although the agent, registered before
// and not behind the command stream, is not sent its assignments again
// when it registers.
func TestKill9BeforeAssign(t *testing.T) {
	dir, port := t.TempDir(), testutil.FreePort(t)
	child := testutil.StartChild(t, "TestHelperControllerNoDispatch",
		[]string{envNoDispatchDir + "=" + dir, envNoDispatchPort + "=" + strconv.Itoa(port)}, 90*time.Second)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	a := newTestAgent(t, url, "edge-1", nil).start()
	if err := child.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	kv, err := a.js.KeyValue(tctx(t), protocol.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	var jobID string
	eventually(t, 30*time.Second, "the job stored by the helper", func() bool {
		keys, err := kv.Keys(tctx(t))
		if err != nil || len(keys) == 0 {
			return false
		}
		jobID = keys[0]
		return true
	})
	child.Kill()
	if n := len(a.commands()); n != 0 {
		t.Fatalf("the agent got %d commands before the kill; the helper should have sent none", n)
	}

	cfg := testConfig(t, dir)
	cfg.NATS.Port, cfg.AckWait = port, time.Second
	c := startController(t, cfg)
	eventually(t, 30*time.Second, "the agent registered again", func() bool {
		a.mu.Lock()
		cursor := a.cursor
		a.mu.Unlock()
		_, err := a.tryRegister(cursor)
		return err == nil
	})
	cmd := a.waitCommand("the assign of the job stored before the kill", isAssign(jobID, 1))
	if cmd.Assign.Job.Target.Agent != "edge-1" {
		t.Fatalf("assign %+v, want the job pinned to edge-1", cmd.Assign)
	}
	if _, _, ok := c.jobs.Get(jobID); !ok {
		t.Fatalf("job %s not in the restarted controller's cache", jobID)
	}
}
