package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// blockUntil is a handler that runs until release is closed or its
// context ends.
func blockUntil(release <-chan struct{}) agent.HandlerFunc {
	return func(ctx context.Context, _ agent.Task) agent.Result {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return agent.Result{}
	}
}

// TestOverlapForbidUnderBacklog: 30 pinned `every: 300ms` jobs (overlap
// forbid, the default) whose handler blocks, on an agent with 2 workers and
// a ready queue of 16: most triggered executions wait in SQLite. At no
// time does a job have more than one live (TRIGGERED or RUNNING) execution
// in the agent's store; its other fires are SKIPPED, and the controller
// records them SKIPPED with reason "overlap" and has at most one execution
// of each job in flight.
func TestOverlapForbidUnderBacklog(t *testing.T) {
	const n = 30
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	cfg := agentConfig("edge-ov", c.NATSURL(), t.TempDir(), nil)
	cfg.Queue.Size = 16
	cfg.Workers = 2
	cfg.Outbox.SkippedWindow = time.Second // a skipped run each second, not each 10 s: the rows come sooner
	release := make(chan struct{})
	ra := startAgent(t, cfg, agent.WithHandler("block", blockUntil(release)))
	t.Cleanup(func() { close(release) }) // before the agent stops
	waitAgentOnline(t, c, "edge-ov")
	ids := make([]string, n)
	for i := range n {
		ids[i] = createJob(t, c, protocol.Job{Name: fmt.Sprintf("ov-%d", i), Handler: "block",
			Schedule: schedule.Spec{Every: "300ms"}, Target: protocol.Target{Agent: "edge-ov"}}).ID
	}
	st := ra.Agent.Store()
	ctx := context.Background()
	spilled := false
	skippedOf := map[string][]string{} // job → exec ids SKIPPED in the agent's store
	testutil.EventuallyFunc(t, 90*time.Second, func() string {
		return fmt.Sprintf("queue spilled (%v) and 3 fires of every job skipped", spilled)
	}, func() bool {
		live, err := st.LiveByJob(ctx)
		if err != nil {
			t.Fatalf("LiveByJob: %v", err)
		}
		triggered := 0
		for id, l := range live {
			triggered += l.Triggered
			if l.Triggered+l.Running > 1 {
				t.Fatalf("job %s has %d live executions (%d triggered, %d running) under overlap forbid",
					id, l.Triggered+l.Running, l.Triggered, l.Running)
			}
		}
		spilled = spilled || triggered > cfg.Queue.Size
		if !spilled {
			return false
		}
		for _, id := range ids {
			rows, err := st.JobExecs(ctx, id, 10000)
			if err != nil {
				t.Fatalf("JobExecs: %v", err)
			}
			skippedOf[id] = skippedOf[id][:0]
			for _, e := range rows {
				if e.State == store.StateSkipped {
					skippedOf[id] = append(skippedOf[id], e.ExecID)
				}
			}
			if len(skippedOf[id]) < 3 {
				return false
			}
		}
		return true
	})
	// Stopped, the agent fires no more (its outbox is flushed). The
	// controller has those SKIPPED, for overlap, and at most one execution
	// of a job in flight (the one still queued in the agent's store).
	ra.Stop(t)
	for _, id := range ids {
		for _, x := range skippedOf[id][:3] {
			waitExec(t, c, x, "SKIPPED (overlap)", func(e protocol.Execution) bool {
				return e.State == protocol.StateSkipped && e.Reason == "overlap"
			})
		}
		inFlight := 0
		for _, e := range execs(t, c, id) {
			if !e.State.Terminal() {
				inFlight++
			}
		}
		if inFlight > 1 {
			t.Errorf("job %s: %d executions in flight in the controller, want at most 1", id, inFlight)
		}
	}
}

// TestUnstartedAtRestart: an agent with one worker, busy with a blocking
// run, queues a fire of each of three periodic jobs and a one-shot run; it
// is stopped cleanly (the queued ones stay TRIGGERED in SQLite) and started
// again on the same store. At the restart each queued fire follows its
// job's misfire policy (late for grace 0, on time for grace 1h), the
// one-shot run runs, and the controller's records say so.
func TestUnstartedAtRestart(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	cfg := agentConfig("edge-un", c.NATSURL(), t.TempDir(), nil)
	cfg.Workers = 1
	cfg.Shutdown.Grace = 50 * time.Millisecond
	release := make(chan struct{})
	fx := newEffects()
	opts := []agent.Option{agent.WithHandler("block", blockUntil(release)), agent.WithHandler("work", fx.handler(time.Millisecond))}
	ra := startAgent(t, cfg, opts...)
	waitAgentOnline(t, c, "edge-un")
	target := protocol.Target{Agent: "edge-un"}
	blocker := createJob(t, c, protocol.Job{Name: "blocker", Handler: "block", Schedule: schedule.Spec{Asap: true}, Target: target})
	waitExecs(t, c, blocker.ID, 1, "RUNNING (the only worker busy)", inState(protocol.StateRunning))

	periodic := func(name string, policy schedule.MisfirePolicy, grace time.Duration) protocol.Job {
		return createJob(t, c, protocol.Job{Name: name, Handler: "work", Schedule: schedule.Spec{Every: "300ms"}, Target: target,
			Misfire: protocol.MisfireSpec{Policy: string(policy), Grace: protocol.Duration(grace)}})
	}
	tests := []struct {
		job    protocol.Job
		want   protocol.State
		reason string
	}{
		{periodic("skip-late", schedule.Skip, 0), protocol.StateSkipped, "misfire"},
		{periodic("fire-all-late", schedule.FireAll, 0), protocol.StateSuccess, ""},
		{periodic("fire-once-on-time", schedule.FireOnce, time.Hour), protocol.StateSuccess, ""},
		{createJob(t, c, protocol.Job{Name: "one-shot", Handler: "work", Schedule: schedule.Spec{Asap: true}, Target: target}),
			protocol.StateSuccess, ""},
	}
	queued := make([]string, len(tests))
	for i, tc := range tests {
		queued[i] = waitExecs(t, c, tc.job.ID, 1, "TRIGGERED (queued behind the blocker)", inState(protocol.StateTriggered))[0].ExecID
	}
	ra.Stop(t)
	st, err := store.Open(context.Background(), cfg.StorePath(), store.Options{})
	if err != nil {
		t.Fatalf("open the stopped agent's store: %v", err)
	}
	for _, x := range queued {
		if e, err := st.ExecByID(context.Background(), x, 1); err != nil || e.State != store.StateTriggered {
			t.Fatalf("%s after the stop: %+v, %v; want TRIGGERED", x, e, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	close(release) // the blocker's retry, if any, does not block again
	startAgent(t, cfg, opts...)
	// The blocker, cut off by the stop, is reported interrupted (retryable).
	waitExecs(t, c, blocker.ID, 1, "interrupted", func(e protocol.Execution) bool { return e.Outcome == retry.OutcomeInterrupted })
	for i, tc := range tests {
		e := waitExec(t, c, queued[i], fmt.Sprintf("%s (%s)", tc.want, tc.job.Name), func(e protocol.Execution) bool {
			return e.State == tc.want && (tc.reason == "" || e.Reason == tc.reason)
		})
		if e.Attempt != 1 {
			t.Errorf("%s (%s): attempt %d, want 1", queued[i], tc.job.Name, e.Attempt)
		}
		done, _ := fx.of(tc.job.ID)
		if ran := done[queued[i]]; (tc.want == protocol.StateSuccess) != (ran == 1) || ran > 1 {
			t.Errorf("%s (%s): handler applied it %d times", queued[i], tc.job.Name, ran)
		}
	}
}
