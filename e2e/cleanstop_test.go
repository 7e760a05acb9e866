package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestAgentCleanStopUnderDispatch: an agent stopped cleanly (an upgrade, a
// restart) in the middle of a dispatch burst of one-shot jobs of one
// attempt each (the default retry) loses and fails none. Under that load
// runs are stored RUNNING before a worker is free (the prefetch, and the
// due runs started in their command's commit); a clean stop closes the
// work channel and lets the workers run what it holds within
// shutdown.grace, so none of them ends "interrupted, not started" with its
// one attempt spent. After the restart every execution is SUCCESS and
// every handler ran exactly once.
func TestAgentCleanStopUnderDispatch(t *testing.T) {
	const (
		jobs    = 240
		clients = 8
	)
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	fx := newEffects()
	cfg := agentConfig("edge-cs", c.NATSURL(), t.TempDir(), nil)
	cfg.Workers = 2 // short handlers on few workers: runs wait RUNNING for one
	cfg.Shutdown.Grace = 20 * time.Second
	cfg.Log.Level = "info"
	start := func() *runningAgent {
		return startAgent(t, cfg, agent.WithHandler("work", fx.handler(5*time.Millisecond)))
	}
	ra := start()
	waitAgentOnline(t, c, "edge-cs")

	// Submit from several clients while the agent runs, and stop it once
	// a sixth of the jobs have run: the rest are in flight or queued.
	var wg sync.WaitGroup
	ids := make([]string, jobs)
	errs := make(chan error, clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += clients {
				j, err := c.CreateJob(testutil.Context(t, 80*time.Second), protocol.Job{
					Name: fmt.Sprintf("cs-%03d", i), Handler: "work", Schedule: schedule.Spec{Asap: true},
					Target: protocol.Target{Agent: "edge-cs"}})
				if err != nil {
					errs <- fmt.Errorf("create %d: %w", i, err)
					return
				}
				ids[i] = j.ID
			}
		}()
	}
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "a sixth of the handlers run" }, func() bool {
		_, runs := fx.snapshot()
		return runs >= jobs/6
	})
	ra.Stop(t)
	_, runsAtStop := fx.snapshot()
	t.Logf("agent stopped cleanly after %d handler runs", runsAtStop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	start()

	byID := map[string]protocol.Execution{}
	testutil.EventuallyFunc(t, 60*time.Second, func() string {
		return fmt.Sprintf("%d executions ended; have %d", jobs, len(byID))
	}, func() bool {
		for _, id := range ids {
			if _, ok := byID[id]; ok {
				continue
			}
			es, _, err := c.ListExecutions(context.Background(), controller.ExecFilter{JobID: id, Limit: 10})
			if err == nil && len(es) == 1 && es[0].State.Terminal() {
				byID[id] = es[0]
			}
		}
		return len(byID) == jobs
	})
	done, runs := fx.snapshot()
	for id, e := range byID {
		if e.State != protocol.StateSuccess || e.Attempt != 1 {
			t.Errorf("job %s: execution %s %s (outcome %q, attempt %d), want SUCCESS at attempt 1",
				id, e.ExecID, e.State, e.Outcome, e.Attempt)
			continue
		}
		if n := done[e.ExecID]; n != 1 {
			t.Errorf("execution %s: handler applied %d times, want 1", e.ExecID, n)
		}
	}
	if runs != jobs {
		t.Errorf("%d handler runs for %d one-shot jobs, want one each", runs, jobs)
	}
}
