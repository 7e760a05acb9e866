package controller

import (
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

const (
	envPruneDir    = "AX_CTL_PRUNE_DIR"
	envPrunePort   = "AX_CTL_PRUNE_PORT"
	envPruneCreate = "AX_CTL_PRUNE_CREATE"
	pruneKillAgent = "edge-pk"
)

// TestHelperPruneControllerProcess is not a test: TestKill9AfterCommandPrune
// runs the test binary again with it to get, in a process it can SIGKILL,
// a controller whose pruner runs every 100 ms with no lag (as
// pruneTestConfig's, whose pass a test calls) and which creates
// AX_CTL_PRUNE_CREATE one-shot jobs for pruneKillAgent.
func TestHelperPruneControllerProcess(t *testing.T) {
	cfg := childConfig(t, envPruneDir, envPrunePort, "TestKill9AfterCommandPrune")
	cfg.cmdPruneEvery, cfg.cmdPruneLag, cfg.marksMargin = 100*time.Millisecond, time.Nanosecond, time.Nanosecond
	cfg.AgentOfflineAfter = cfg.HeartbeatInterval // every heartbeat stored: its cursor at once
	n, _ := strconv.Atoi(testutil.ChildEnv(t, envPruneCreate, "TestKill9AfterCommandPrune"))
	runChildController(cfg, n, func() protocol.Job { return asapJob(pruneKillAgent) })
}

// TestKill9AfterCommandPrune kills a controller process (embedded server
// and all) with SIGKILL right after its pruner removed the commands its
// agent applied from AX_CMD, and starts it again on the same store: the
// agent, registering at its cursor, is not taken for one that lost its
// store, AX_CMD still holds its last command, none of the runs it applied
// is sent again, and the runs of the new process reach it and are applied.
func TestKill9AfterCommandPrune(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns controller processes")
	}
	dir, port := t.TempDir(), testutil.FreePort(t)
	start := func(create int) *testutil.Child {
		env := []string{envPruneDir + "=" + dir, envPrunePort + "=" + strconv.Itoa(port), envPruneCreate + "=" + strconv.Itoa(create)}
		return testutil.StartChild(t, "TestHelperPruneControllerProcess", env, 90*time.Second)
	}
	child := start(4)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	a := newTestAgent(t, url, pruneKillAgent, nil).start()
	js := clientJS(t, url)
	ctx := tctx(t)
	execs, err := js.KeyValue(ctx, protocol.BucketExecs)
	if err != nil {
		t.Fatal(err)
	}
	runAll := func(runs []*protocol.Run) {
		for _, r := range runs {
			a.runAttempt(r.Job.ID, r.ExecID, r.Attempt, r.RunAt, retry.OutcomeSuccess, ok)
		}
		for _, r := range runs {
			eventually(t, 30*time.Second, r.ExecID+" SUCCESS", func() bool {
				e, err := execs.Get(ctx, r.ExecID)
				if err != nil {
					return false
				}
				x, err := decodeExec(e.Value())
				return err == nil && x.State == protocol.StateSuccess
			})
		}
	}
	runs := func() []*protocol.Run {
		var out []*protocol.Run
		for _, c := range a.commands() {
			if c.Kind == protocol.CmdRun {
				out = append(out, c.Run)
			}
		}
		return out
	}

	eventually(t, 20*time.Second, "4 run commands", func() bool { return len(runs()) == 4 })
	first := runs()
	runAll(first)
	seqs := a.commandSeqs()
	last := seqs[len(seqs)-1]
	a.sendHeartbeat(protocol.Heartbeat{Cursor: last})
	eventually(t, 20*time.Second, "the applied commands removed from AX_CMD", func() bool {
		return commandsHeld(t, js, a.id) == 1
	})
	child.Kill() // right after a pass: they run every 100 ms

	start(2)
	// The agent re-registers after the reconnect, as ax-agent does.
	var rr protocol.RegisterReply
	eventually(t, 60*time.Second, "re-registration", func() bool {
		var err error
		rr, err = a.tryRegister(last)
		return err == nil && rr.Error == ""
	})
	if rr.ResumeAfter > last {
		t.Fatalf("registration at cursor %d after the restart: resume_after %d, taken for a lost store", last, rr.ResumeAfter)
	}
	if got := commandsHeld(t, js, a.id); got < 1 {
		t.Fatalf("AX_CMD holds %d commands of %s after the restart, want at least its last", got, a.id)
	}
	eventually(t, 30*time.Second, "the new process's 2 runs", func() bool { return len(runs()) == 6 })
	seen := map[string]bool{}
	for _, r := range runs() {
		if seen[r.ExecID] {
			t.Fatalf("run of %s received twice, want once", r.ExecID)
		}
		seen[r.ExecID] = true
	}
	runAll(runs()[4:])
}
