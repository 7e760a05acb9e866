package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// laggingJobsKV is ax_jobs whose watchers deliver nothing after the
// initial values while lag is set: the job cache of a replica whose
// watcher has not caught up with another replica's writes (cut off from
// NATS, frozen, just reconnected).
type laggingJobsKV struct {
	jetstream.KeyValue
	lag *atomic.Bool
}

func (kv laggingJobsKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := kv.KeyValue.WatchAll(ctx, opts...)
	if err != nil {
		return nil, err
	}
	out := &laggingWatcher{KeyWatcher: w, ch: make(chan jetstream.KeyValueEntry)}
	go func() {
		defer close(out.ch)
		for e := range w.Updates() {
			if e != nil && kv.lag.Load() {
				continue
			}
			select {
			case out.ch <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

type laggingWatcher struct {
	jetstream.KeyWatcher
	ch chan jetstream.KeyValueEntry
}

func (w *laggingWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }

// TestFailedAttemptOfJobNotSeenYetIsRetried: a replica that takes over a
// shard works an execution of a one-shot job created on the other
// replica, which its job cache has not seen yet (its watcher is behind).
// The job allows three attempts; attempt 1 fails, and the second attempt
// is sent:
//   - "failure after takeover": the new owner applies the failed attempt.
//     Before, the missing job was taken for one without a retry policy
//     (one attempt) and the execution FAILED at attempt 1 with
//     "attempts_exhausted" (TestFaultInjectionReplicas, seed 1000).
//   - "retry after takeover": the old owner applied the failure; the new
//     owner's reload arms the retry, which fires there. Before, the retry
//     of a job missing from the cache was taken for one of a deleted job,
//     and the execution was CANCELLED.
func TestFailedAttemptOfJobNotSeenYetIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failOnOwner bool // attempt 1 fails while ctl-b still owns the shard
	}{
		{"failure after takeover", false},
		{"retry after takeover", true},
	} {
		t.Run(tc.name, func(t *testing.T) { testJobNotSeenYet(t, tc.failOnOwner) })
	}
}

// laggingPair starts ctl-a, whose job watcher delivers nothing after its
// start (laggingJobsKV), then ctl-b, and waits until they split the shards.
func laggingPair(t *testing.T) (srv *natstest.Server, a, b *Controller) {
	t.Helper()
	srv = natstest.Start(t)
	ttl := 2 * time.Second
	lag := &atomic.Bool{}
	a, err := New(replicaConfig(t, srv.URL(), "ctl-a", ttl))
	if err != nil {
		t.Fatal(err)
	}
	a.hooks.wrapJobsKV = func(kv jetstream.KeyValue) jetstream.KeyValue { return laggingJobsKV{kv, lag} }
	if err := a.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	lag.Store(true)
	b = startController(t, replicaConfig(t, srv.URL(), "ctl-b", ttl))
	eventually(t, 30*time.Second, "the shards split between ctl-a and ctl-b", func() bool {
		na, nb := len(a.own.OwnedShards()), len(b.own.OwnedShards())
		return na > 0 && nb > 0 && na+nb == a.cfg.Shards
	})
	return srv, a, b
}

// createOnOwnShard creates spec on b until a job lands on one of b's own
// shards (b makes its executions and sends its runs) and returns it.
func createOnOwnShard(t *testing.T, b *Controller, spec protocol.Job) protocol.Job {
	t.Helper()
	for range 64 {
		got, err := b.CreateJob(tctx(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		if b.own.OwnsJob(got.ID) {
			return got
		}
	}
	t.Fatalf("64 jobs created on %s, none on its own shards", b.cfg.Node)
	return protocol.Job{}
}

// handOver closes b and waits until a owns every shard, without having
// seen job.
func handOver(t *testing.T, a, b *Controller, job protocol.Job) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ctl-a owns every shard", func() bool { return len(a.own.OwnedShards()) == a.cfg.Shards })
	if a.jobs.Known(job.ID, 0) {
		t.Fatal("ctl-a's job cache has seen the job: its watcher was not held back")
	}
}

func testJobNotSeenYet(t *testing.T, failOnOwner bool) {
	srv, a, b := laggingPair(t)
	ag := newTestAgent(t, srv.URL(), "edge-1", nil).start()

	// A job on one of ctl-b's shards, created there: ctl-b sends its run.
	// A failure applied by ctl-b waits 3 s for its retry, past the takeover.
	base := 100 * time.Millisecond
	if failOnOwner {
		base = 3 * time.Second
	}
	spec := asapJob("edge-1")
	spec.Retry = protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(base), Max: protocol.Duration(10 * base)}
	job := createOnOwnShard(t, b, spec)
	run := ag.waitCommand("run of the job's attempt 1", func(c protocol.Command) bool {
		return c.Kind == protocol.CmdRun && c.Run.Job.ID == job.ID && c.Run.Attempt == 1
	})
	execID := run.Run.ExecID
	fail := func(c *Controller) protocol.Execution {
		ag.runAttempt(job.ID, execID, 1, run.Run.RunAt, retry.OutcomeFailure, retry.Result{Retryable: true, Message: "HTTP 503"})
		return waitExec(t, c, execID, "attempt 1's failure applied", func(e protocol.Execution) bool {
			return e.State == protocol.StateRetryWaiting || e.State.Terminal() || e.Attempt > 1
		})
	}
	if failOnOwner {
		if e := fail(b); e.State != protocol.StateRetryWaiting {
			t.Fatalf("after attempt 1 failed on ctl-b: %s at attempt %d (%s), want RETRY_WAITING", e.State, e.Attempt, e.Reason)
		}
	}

	// ctl-b leaves; ctl-a takes its shards without having seen the job.
	handOver(t, a, b, job)
	if !failOnOwner {
		if e := fail(a); e.State == protocol.StateFailed {
			t.Fatalf("execution FAILED at attempt %d (%s) with 3 attempts allowed", e.Attempt, e.Reason)
		}
	}
	ag.waitCommand("run of attempt 2", isRun(execID, 2))
	if e, err := a.GetExecution(tctx(t), execID); err != nil || e.State.Terminal() {
		t.Fatalf("execution after attempt 2 was sent: %+v, %v", e, err)
	}
}

// TestWaitingRunOfJobNotSeenYetIsPlaced: a replica that takes over a
// shard keeps the PENDING execution of a group job that waits for an
// agent of its group, although its job cache has not seen the job
// (created on the other replica; its watcher is behind), and gives it to
// the first member that registers. Before, the placement's pass took the
// job missing from the cache for a deleted one and forgot the execution
// (its job was not deleted, so it was not cancelled either): it stayed
// PENDING with nobody to place it.
func TestWaitingRunOfJobNotSeenYetIsPlaced(t *testing.T) {
	srv, a, b := laggingPair(t)
	job := createOnOwnShard(t, b, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Group: "site=new"}})
	id := protocol.ExecID(job.ID, job.CreatedAt)
	waitExec(t, b, id, "PENDING without an agent", inState(protocol.StatePending))
	handOver(t, a, b, job)
	// ctl-a's ownership loop runs a pass of its placement over the
	// waiting executions every tick, the one of the job not seen among
	// them once its reload noted it; a registration runs one too.
	ag := newTestAgent(t, srv.URL(), "newcomer", map[string]string{"site": "new"}).start()
	ag.waitCommand("run of the waiting execution", isRun(id, 1))
	if e, err := a.GetExecution(tctx(t), id); err != nil || e.Agent != "newcomer" {
		t.Fatalf("execution after its run was sent: %+v, %v; want it placed on newcomer", e, err)
	}
}
