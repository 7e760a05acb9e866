package controller

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// retentionFixture is a controller whose wall clock the test steps (timers
// stay real) and whose sweeper runs every 20ms, with one agent.
type retentionFixture struct {
	c   *Controller
	clk *steppedClock
	a   *testAgent
}

// newRetentionFixture starts a retentionFixture; mods change its config
// before the controller starts.
func newRetentionFixture(t *testing.T, mods ...func(*Config)) *retentionFixture {
	clk := &steppedClock{}
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = clk
	cfg.monoNow = time.Now
	cfg.historySweep = 20 * time.Millisecond
	for _, m := range mods {
		m(&cfg)
	}
	c := startController(t, cfg)
	return &retentionFixture{c: c, clk: clk, a: newTestAgent(t, c.NATSURL(), "edge-1", nil).start()}
}

// oneShot runs an asap job to SUCCESS and returns it and its exec id.
func (f *retentionFixture) oneShot(t *testing.T) (protocol.Job, string) {
	t.Helper()
	j := asapJob("edge-1")
	j.IdempotencyKey = "order-" + t.Name()
	job, err := f.c.CreateJob(tctx(t), j)
	if err != nil {
		t.Fatal(err)
	}
	run := f.a.waitCommand("run", isRun(protocol.ExecID(job.ID, job.CreatedAt), 1)).Run
	f.a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, ok)
	waitExec(t, f.c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
	return job, run.ExecID
}

// periodic creates a job every 1h pinned to the fixture's agent and
// waits for its assign.
func (f *retentionFixture) periodic(t *testing.T) protocol.Job {
	t.Helper()
	per, err := f.c.CreateJob(tctx(t), everyJob("edge-1", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	f.a.waitCommand("assign", isAssign(per.ID, 1))
	return per
}

// fire makes the agent fire a periodic job once, to SUCCESS.
func (f *retentionFixture) fire(t *testing.T, job protocol.Job) (string, time.Time) {
	t.Helper()
	s, err := schedule.Parse(job.Schedule, job.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := s.Next(job.CreatedAt)
	id := protocol.ExecID(job.ID, at)
	f.a.runAttempt(job.ID, id, 1, at, retry.OutcomeSuccess, ok)
	waitExec(t, f.c, id, "SUCCESS", inState(protocol.StateSuccess))
	return id, at
}

// mixedWork is the work retentionFixture.mixedWork makes: a one-shot job
// run to SUCCESS, a periodic job fired once to SUCCESS (both in the
// history index), and a one-shot job delayed 30 minutes, its execution
// PENDING.
type mixedWork struct {
	once, per, pending protocol.Job
	onceExec, fired    string
}

// mixedWork makes a mixedWork.
func (f *retentionFixture) mixedWork(t *testing.T) mixedWork {
	t.Helper()
	var w mixedWork
	w.once, w.onceExec = f.oneShot(t)
	w.per = f.periodic(t)
	w.fired, _ = f.fire(t, w.per)
	delayed := asapJob("edge-1")
	delayed.Schedule = schedule.Spec{Delay: "30m"}
	var err error
	if w.pending, err = f.c.CreateJob(tctx(t), delayed); err != nil {
		t.Fatal(err)
	}
	f.indexed(t, w.onceExec)
	f.indexed(t, w.fired)
	return w
}

// indexed waits until the history index holds id in a terminal state.
func (f *retentionFixture) indexed(t *testing.T, id string) {
	t.Helper()
	eventually(t, 10*time.Second, id+" terminal in the history index", func() bool {
		e, ok, err := f.c.hist.idx.Get(context.Background(), id)
		return err == nil && ok && e.State.Terminal()
	})
}

// replay publishes the three reports of attempt 1 of execution id again,
// under new Msg-Ids (a failure this time), as an agent replaying its
// outbox long after would.
func (f *retentionFixture) replay(jobID, id string, sched time.Time) {
	for _, k := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning} {
		f.a.publish(f.a.rep(jobID, id, 1, k, sched), "replay/"+id+"/"+string(k))
	}
	r := finished(f.a.rep(jobID, id, 1, protocol.ReportFinished, sched), retry.OutcomeFailure, permanent, time.Millisecond)
	f.a.publish(r, "replay/"+id+"/finished")
}

// leftLive waits until id has no record in ax_execs.
func (f *retentionFixture) leftLive(t *testing.T, id string) {
	t.Helper()
	eventually(t, 10*time.Second, id+" gone from ax_execs", func() bool {
		v, err := f.c.ex.readExec(context.Background(), id)
		return err == nil && v.Rec == nil
	})
}

// subjects returns the subjects a KV bucket's stream holds messages on.
func subjects(t *testing.T, c *Controller, bucket string) map[string]uint64 {
	t.Helper()
	st, err := c.js.Stream(tctx(t), streams.KVStream(bucket))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(tctx(t), jetstream.WithSubjectFilter(streams.KVSubject(bucket, ">")))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// endedOneShots runs n asap one-shots to SUCCESS, waits until the history
// index holds each, and returns their exec ids and job ids.
func (f *retentionFixture) endedOneShots(t *testing.T, n int) (ids, jobIDs []string) {
	t.Helper()
	c, ctx := f.c, tctx(t)
	for range n {
		job, err := c.CreateJob(ctx, asapJob("edge-1"))
		if err != nil {
			t.Fatal(err)
		}
		run := f.a.waitCommand("run", isRun(protocol.ExecID(job.ID, job.CreatedAt), 1)).Run
		f.a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, ok)
		ids, jobIDs = append(ids, run.ExecID), append(jobIDs, job.ID)
	}
	for _, id := range ids {
		waitExec(t, c, id, "SUCCESS", inState(protocol.StateSuccess))
		f.indexed(t, id)
	}
	return ids, jobIDs
}

// liveExecs counts the executions of ids still in ax_execs.
func (f *retentionFixture) liveExecs(t *testing.T, ids []string) int {
	t.Helper()
	left := 0
	for _, id := range ids {
		if v, err := f.c.ex.readExec(tctx(t), id); err != nil || v.Rec != nil {
			left++
		}
	}
	return left
}

// liveJobs counts the jobs of ids still in the job cache.
func (f *retentionFixture) liveJobs(ids []string) int {
	live := 0
	for _, id := range ids {
		if _, _, ok := f.c.jobs.Get(id); ok {
			live++
		}
	}
	return live
}
