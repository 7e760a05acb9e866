package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

func startChild(t *testing.T, cfg Config) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(cfg)
	must(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	if os.Getenv("AX_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// finalKinds are the report kinds that end an attempt on the agent.
func isFinal(k protocol.ReportKind) bool {
	return k == protocol.ReportFinished || k == protocol.ReportSkipped || k == protocol.ReportInterrupted
}

// checkComplete fails unless every attempt with a triggered report has a
// final report and every msg id arrived exactly once.
func checkComplete(t *testing.T, c *ctl) (attempts int) {
	t.Helper()
	return checkCompleteExcept(t, c, nil)
}

// checkCompleteExcept is checkComplete for attempts not in queued (the
// attempts a stopped agent holds TRIGGERED in its store).
func checkCompleteExcept(t *testing.T, c *ctl, queued map[string]bool) (attempts int) {
	t.Helper()
	triggered, final := attemptsSeen(c)
	for k := range triggered {
		if !final[k] && !queued[k] {
			t.Errorf("attempt %s was triggered but has no final report", k)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.msgIDs {
		if n != 1 {
			t.Errorf("msg id %s arrived %d times", id, n)
		}
	}
	return len(triggered)
}

// settled reports whether every attempt with a triggered report has a
// final report or is TRIGGERED in the stopped agent's store st (durable;
// it runs at the next start: a graceful stop does not dispatch queued
// attempts). queued holds the latter.
func settled(c *ctl, st *store.Store) (queued map[string]bool, ok bool) {
	trig, final := attemptsSeen(c)
	queued = map[string]bool{}
	for key, r := range trig {
		if final[key] {
			continue
		}
		e, err := st.ExecByID(context.Background(), r.ExecID, r.Attempt)
		if err != nil || e.State != store.StateTriggered {
			return nil, false
		}
		queued[key] = true
	}
	return queued, true
}

// attemptsSeen sorts the reports c received by attempt ("<exec id>/<attempt>"):
// the triggered report of each attempt that has one, and the attempts with
// a final report.
func attemptsSeen(c *ctl) (triggered map[string]protocol.Report, final map[string]bool) {
	triggered, final = map[string]protocol.Report{}, map[string]bool{}
	for _, r := range c.all() {
		key := r.ExecID + "/" + strconv.Itoa(r.Attempt)
		if r.Kind == protocol.ReportTriggered {
			triggered[key] = r
		}
		if isFinal(r.Kind) {
			final[key] = true
		}
	}
	return triggered, final
}

func allFinal(c *ctl) bool {
	trig, final := attemptsSeen(c)
	for k := range trig {
		if !final[k] {
			return false
		}
	}
	return true
}

// TestKill9DuringExecHandler: SIGKILL the agent process while an exec
// handler runs; after a restart exactly one interrupted report arrives for
// it and no execution is missing.
func TestKill9DuringExecHandler(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-9", c.srv.URL())
	cfg.Exec.Allow = []string{"/bin/sh"}
	cfg.Log.Level = "error"
	child := startChild(t, cfg)

	periodic := newJob("edge-9", "noop", schedule.Spec{Every: "50ms"}, nil)
	c.send("edge-9", assignCmd(periodic))
	pidFile := tempFile(t, "handler.pid")
	long := newJob("edge-9", "exec", schedule.Spec{Asap: true},
		map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo $$ > " + pidFile + "; exec sleep 300"}})
	run := runCmd(long, 1, time.Now())
	c.send("edge-9", run)
	var pid int
	waitFor(t, 15*time.Second, "exec handler running", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	waitFor(t, 10*time.Second, "periodic fires", func() bool { return c.count(protocol.ReportFinished) >= 3 })

	must(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	_ = syscall.Kill(-pid, syscall.SIGKILL) // the orphaned handler process group

	child = startChild(t, cfg)
	waitFor(t, 15*time.Second, "interrupted report", func() bool {
		for _, r := range c.reportsOf(run.Run.ExecID) {
			if r.Kind == protocol.ReportInterrupted {
				return true
			}
		}
		return false
	})
	before := c.count(protocol.ReportFinished)
	waitFor(t, 10*time.Second, "periodic fires after restart", func() bool { return c.count(protocol.ReportFinished) >= before+3 })
	// A clean stop and one more restart must not report it again.
	must(t, child.Process.Signal(syscall.SIGTERM))
	_ = child.Wait()
	child = startChild(t, cfg)
	n0, _ := c.heartbeats()
	waitFor(t, 10*time.Second, "heartbeats of the third run", func() bool { n, _ := c.heartbeats(); return n >= n0+3 })
	must(t, child.Process.Signal(syscall.SIGTERM))
	_ = child.Wait()
	st, err := store.Open(context.Background(), cfg.StorePath(), store.Options{})
	must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var queued map[string]bool
	waitFor(t, 10*time.Second, "every triggered attempt has a final report or is queued in the store", func() bool {
		var ok bool
		queued, ok = settled(c, st)
		return ok
	})
	if len(queued) > 0 {
		t.Logf("attempts queued in the store at the last stop: %v", queued)
	}

	interrupted := 0
	kinds := map[protocol.ReportKind]int{}
	for _, r := range c.reportsOf(run.Run.ExecID) {
		kinds[r.Kind]++
		if r.Kind == protocol.ReportInterrupted {
			interrupted++
			if r.Reason != "restart" {
				t.Errorf("interrupted reason = %q", r.Reason)
			}
		}
	}
	if interrupted != 1 {
		t.Fatalf("%d interrupted reports, want exactly 1 (%v)", interrupted, kinds)
	}
	if kinds[protocol.ReportTriggered] != 1 || kinds[protocol.ReportRunning] != 1 || kinds[protocol.ReportFinished] != 0 {
		t.Fatalf("reports of the killed attempt: %v", kinds)
	}
	if n := checkCompleteExcept(t, c, queued); n < 6 {
		t.Fatalf("only %d attempts", n)
	}
}

// TestLinkCutKeepsFiringAndDeliversEverything: the TCP link is cut while a
// job fires every 100 ms; firing goes on, and once the link is back every
// report arrives, each msg id exactly once.
func TestLinkCutKeepsFiringAndDeliversEverything(t *testing.T) {
	c := startCtl(t)
	p, err := faultproxy.New(c.srv.Addr())
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	cfg := testConfig(t, "edge-l", p.URL())
	var runs atomicCounter
	startAgent(t, cfg, WithHandler("noop", func(ctx context.Context, tk Task) Result { runs.inc(); return Result{} }))
	j := newJob("edge-l", "noop", schedule.Spec{Every: "100ms"}, nil)
	c.send("edge-l", assignCmd(j))
	waitFor(t, 10*time.Second, "fires before the cut", func() bool { return c.count(protocol.ReportFinished) >= 3 })

	p.Cut()
	cutAt := runs.get()
	waitFor(t, 15*time.Second, "ten fires while cut", func() bool { return runs.get() >= cutAt+10 })
	p.Heal()

	waitFor(t, 30*time.Second, "every run reported", func() bool {
		return int64(c.count(protocol.ReportFinished)) >= runs.get() && allFinal(c)
	})
	checkComplete(t, c)
}
