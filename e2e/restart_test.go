package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// effects counts the successful side effects of a handler per exec id, as
// a business system keyed by exec id would see them.
type effects struct {
	mu   sync.Mutex
	done map[string]int
	runs int
}

func newEffects() *effects { return &effects{done: map[string]int{}} }

// handler simulates work of d (ending early if its context ends), then
// applies its effect.
func (f *effects) handler(d time.Duration) agent.HandlerFunc {
	return func(ctx context.Context, t agent.Task) agent.Result {
		f.mu.Lock()
		f.runs++
		f.mu.Unlock()
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return agent.Result{Code: 1, Message: "stopped", Retryable: true}
		case <-tm.C:
		}
		f.mu.Lock()
		f.done[t.ExecID]++
		f.mu.Unlock()
		return agent.Result{}
	}
}

// snapshot returns the effects applied so far (of every job) and the
// number of handler runs.
func (f *effects) snapshot() (map[string]int, int) {
	return f.of("")
}

// of returns the effects applied to executions of jobID ("": every job)
// and the number of handler runs.
func (f *effects) of(jobID string) (map[string]int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.done))
	for k, v := range f.done {
		if jobID == "" || strings.HasPrefix(k, jobID+"-") {
			m[k] = v
		}
	}
	return m, f.runs
}

// settle deletes the job, waits until none of its executions is left in
// a non-terminal state, and checks that each exec id the handler applied is
// SUCCESS in the controller and was applied once.
func settle(t *testing.T, c *controller.Controller, ev *events, jobID string, fx *effects) []protocol.Execution {
	t.Helper()
	if err := c.DeleteJob(testutil.Context(t, 80*time.Second), jobID); err != nil {
		t.Fatalf("DeleteJob: %v", err)
	}
	var all []protocol.Execution
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "no execution left in flight: " + summarize(all) }, func() bool {
		all = execs(t, c, jobID)
		done, _ := fx.of(jobID)
		byID := map[string]protocol.Execution{}
		for _, e := range all {
			if !e.State.Terminal() {
				return false
			}
			byID[e.ExecID] = e
		}
		for id := range done {
			if byID[id].State != protocol.StateSuccess {
				return false
			}
		}
		return true
	})
	done, _ := fx.of(jobID)
	for id, n := range done {
		if n != 1 {
			t.Errorf("%s applied %d times, want once", id, n)
		}
	}
	success := 0
	for _, e := range all {
		if e.State != protocol.StateSuccess {
			t.Logf("%s ended %s (attempt %d, reason %q, outcome %q)", e.ExecID, e.State, e.Attempt, e.Reason, e.Outcome)
		}
		if e.State == protocol.StateSuccess {
			success++
			if done[e.ExecID] != 1 {
				t.Errorf("%s is SUCCESS but its handler applied it %d times", e.ExecID, done[e.ExecID])
			}
		}
	}
	if ev != nil {
		seen := map[string]int{}
		for _, x := range ev.All() {
			if x.JobID == jobID && x.To == protocol.StateSuccess {
				seen[x.ExecID]++
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s: %d SUCCESS events, want 1", id, n)
			}
		}
	}
	t.Logf("%d executions, %d SUCCESS: %s", len(all), success, summarize(all))
	return all
}

// countSuccess returns how many executions of jobID are SUCCESS.
func countSuccess(t *testing.T, c *controller.Controller, jobID string) int {
	n := 0
	for _, e := range execs(t, c, jobID) {
		if e.State == protocol.StateSuccess {
			n++
		}
	}
	return n
}

// TestAgentRestart: an agent stopped while its periodic job runs and
// restarted on the same SQLite file goes on firing; no execution is
// applied twice and none is left in flight.
func TestAgentRestart(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	fx := newEffects()
	cfg := agentConfig("edge-ar", c.NATSURL(), t.TempDir(), nil)
	// Round 0 stops with a long grace (the running handler finishes);
	// round 1 with a grace shorter than the handler (it is cut off and its
	// attempt retried by the controller).
	graces := []time.Duration{2 * time.Second, time.Millisecond, 2 * time.Second}
	// The handler runs longer than outbox.hold (200 ms here): the
	// controller sees its attempt RUNNING while it runs (a shorter one is
	// reported once, finished).
	cfg.Outbox.Hold = 200 * time.Millisecond
	start := func(round int) *runningAgent {
		cfg := cfg
		cfg.Shutdown.Grace = graces[round]
		return startAgent(t, cfg, agent.WithHandler("work", fx.handler(400*time.Millisecond)))
	}
	ra := start(0)
	waitAgentOnline(t, c, "edge-ar")
	j := createJob(t, c, protocol.Job{Name: "work", Handler: "work", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Agent: "edge-ar"}, Retry: protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(50 * time.Millisecond)}})

	for round := range 2 {
		before := countSuccess(t, c, j.ID)
		waitExecs(t, c, j.ID, before+3, "in SUCCESS", inState(protocol.StateSuccess))
		// Stop while a handler runs.
		_, runs := fx.snapshot()
		testutil.EventuallyFunc(t, 10*time.Second, func() string { return "a handler running" }, func() bool {
			es := execs(t, c, j.ID)
			_, r := fx.snapshot()
			for _, e := range es {
				if e.State == protocol.StateRunning && r > runs {
					return true
				}
			}
			return false
		})
		ra.Stop(t)
		t.Logf("round %d: agent stopped (grace %s)", round, graces[round])
		ra = start(round + 1)
	}
	before := countSuccess(t, c, j.ID)
	waitExecs(t, c, j.ID, before+3, "in SUCCESS after the restarts", inState(protocol.StateSuccess))
	settle(t, c, ev, j.ID, fx)
}

// TestControllerRestart: the controller is closed and started again on the
// same data dir and port while the agent keeps running. The agent fires
// through the outage, reconnects by itself, and the reports it made while
// the controller was down are applied; no execution is lost.
func TestControllerRestart(t *testing.T) {
	dir, port := t.TempDir(), testutil.FreePort(t)
	c1 := startCtl(t, ctlConfig(dir, port))
	url := c1.NATSURL()
	fx := newEffects()
	startAgent(t, agentConfig("edge-cr", url, t.TempDir(), nil), agent.WithHandler("work", fx.handler(10*time.Millisecond)))
	waitAgentOnline(t, c1, "edge-cr")
	j := createJob(t, c1, protocol.Job{Name: "work", Handler: "work", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Agent: "edge-cr"}})
	waitExecs(t, c1, j.ID, 3, "in SUCCESS", inState(protocol.StateSuccess))
	// A one-shot waiting on the agent across the restart.
	later := createJob(t, c1, protocol.Job{Name: "later", Handler: "work", Schedule: schedule.Spec{Delay: "1s"},
		Target: protocol.Target{Agent: "edge-cr"}})

	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	doneAtClose, _ := fx.snapshot()
	// The agent keeps firing while the controller is away.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "5 more fires while the controller is down" }, func() bool {
		done, _ := fx.snapshot()
		return len(done) >= len(doneAtClose)+5
	})
	whileDown, _ := fx.snapshot()

	c2 := startCtl(t, ctlConfig(dir, port))
	if c2.NATSURL() != url {
		t.Fatalf("restarted controller on %s, want %s", c2.NATSURL(), url)
	}
	ev := watchEvents(t, url)
	// Every fire made while it was down is applied.
	for id := range whileDown {
		if doneAtClose[id] == 0 {
			waitExec(t, c2, id, "SUCCESS (made while the controller was down)", inState(protocol.StateSuccess))
		}
	}
	// The one-shot created before the restart runs once.
	waitExecs(t, c2, later.ID, 1, "in SUCCESS", inState(protocol.StateSuccess))
	if n := len(execs(t, c2, later.ID)); n != 1 {
		t.Errorf("one-shot has %d executions, want 1", n)
	}
	// And the periodic job goes on after the restart.
	before := countSuccess(t, c2, j.ID)
	waitExecs(t, c2, j.ID, before+3, "in SUCCESS after the restart", inState(protocol.StateSuccess))
	settle(t, c2, ev, j.ID, fx)
}
