package controller

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
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

// TestRetentionRemovesEndedWork: a terminal execution stays in ax_execs
// through the grace period (reports.dedup_window, default 2h) and then
// leaves it without a trace in the stream; a one-shot job whose execution
// left leaves ax_jobs, the job cache and its idempotency key; both stay
// readable from history until history.retention, then go. Live work (a
// PENDING delayed one-shot, a periodic job) stays.
func TestRetentionRemovesEndedWork(t *testing.T) {
	f := newRetentionFixture(t)
	c, ctx := f.c, tctx(t)
	w := f.mixedWork(t)
	job, execID, per, fired, pending := w.once, w.onceExec, w.per, w.fired, w.pending

	// Within the grace nothing moves.
	f.clk.step(DefaultDedupWindow - time.Minute)
	for range 5 {
		if err := c.ret.Sweep(ctx, retention.NewSweeper()); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := c.ex.readExec(ctx, execID); v.Rec == nil {
		t.Fatalf("%s left ax_execs before the grace ended", execID)
	}

	f.clk.step(2 * time.Minute)
	f.leftLive(t, execID)
	f.leftLive(t, fired)
	eventually(t, 10*time.Second, "one-shot job gone from ax_jobs and the cache", func() bool {
		_, err := c.kv.Jobs.Get(ctx, job.ID)
		_, _, cached := c.jobs.Get(job.ID)
		return errors.Is(err, jetstream.ErrKeyNotFound) && !cached
	})
	eventually(t, 10*time.Second, "no message left on the subjects of what was removed", func() bool {
		es, js, is := subjects(t, c, protocol.BucketExecs), subjects(t, c, protocol.BucketJobs), subjects(t, c, protocol.BucketIdem)
		return es[streams.KVSubject(protocol.BucketExecs, execID)] == 0 && es[streams.KVSubject(protocol.BucketExecs, fired)] == 0 &&
			js[streams.KVSubject(protocol.BucketJobs, job.ID)] == 0 && is[streams.KVSubject(protocol.BucketIdem, streams.IdemKey(job.IdempotencyKey))] == 0
	})
	// Live work stays.
	for _, id := range []string{per.ID, pending.ID} {
		if _, err := c.GetJob(ctx, id); err != nil {
			t.Errorf("live job %s: %v", id, err)
		}
	}
	if v, _ := c.ex.readExec(ctx, protocol.ExecID(pending.ID, pending.CreatedAt.Add(30*time.Minute))); v.Rec == nil || v.Rec.State != protocol.StatePending {
		t.Errorf("pending delayed execution: %+v", v.Rec)
	}
	// History still has both, and the retired job.
	if e, err := c.GetExecution(ctx, execID); err != nil || e.State != protocol.StateSuccess {
		t.Fatalf("GetExecution from history = %+v, %v", e, err)
	}
	if es, _, err := c.ListExecutions(ctx, ExecFilter{JobID: job.ID}); err != nil || len(es) != 1 || es[0].ExecID != execID {
		t.Fatalf("ListExecutions of the retired job = %+v, %v", es, err)
	}
	if live, _, _ := c.ListJobs(ctx, JobFilter{}); len(live) != 2 {
		t.Errorf("live jobs = %d, want 2 (periodic and pending)", len(live))
	}
	if r, _, err := c.ListJobs(ctx, JobFilter{Retired: true}); err != nil || len(r) != 1 || r[0].ID != job.ID {
		t.Fatalf("retired jobs = %+v, %v", r, err)
	}
	// A get of the retired job says where it went.
	if _, err := c.GetJob(ctx, job.ID); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrJobRetired) {
		t.Errorf("GetJob of the retired job: %v, want ErrNotFound saying it was retired", err)
	}
	if _, err := c.GetJob(ctx, protocol.NewJobID("ctl", f.clk.Now(), 7)); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrJobRetired) {
		t.Errorf("GetJob of a job never made: %v, want a plain ErrNotFound", err)
	}
	if _, err := c.RetryExecution(ctx, execID); !errors.Is(err, ErrConflict) {
		t.Errorf("retry of an execution in history: %v, want ErrConflict", err)
	}
	// The idempotency key is free again.
	j := asapJob("edge-1")
	j.IdempotencyKey = job.IdempotencyKey
	if _, err := c.CreateJob(ctx, j); err != nil {
		t.Errorf("create with the released idempotency key: %v", err)
	}

	// After history.retention, the history lets them go too.
	f.clk.step(c.cfg.History.Retention + time.Minute)
	eventually(t, 10*time.Second, "history pruned", func() bool {
		_, err := c.GetExecution(ctx, execID)
		r, _, _ := c.ListJobs(ctx, JobFilter{Retired: true})
		return errors.Is(err, ErrNotFound) && len(r) == 0
	})
}

// TestRetentionLateReportsNeverResurrect: the reports of executions that
// left live state, replayed (new Msg-Ids, past the stream's duplicate
// window), are refused as duplicates: no record comes back in ax_execs,
// and history keeps what it had. A periodic fire would otherwise be made
// again as a new execution.
func TestRetentionLateReportsNeverResurrect(t *testing.T) {
	f := newRetentionFixture(t)
	c, ctx := f.c, tctx(t)
	per := f.periodic(t)
	fired, at := f.fire(t, per)
	job, execID := f.oneShot(t)
	f.indexed(t, fired)
	f.indexed(t, execID)
	before, err := c.GetExecution(ctx, fired)
	if err != nil {
		t.Fatal(err)
	}
	// The test's agent fired the periodic job at its next time, an hour
	// ahead of the clock; a real agent fires it then (within its
	// clock.max_skew), so its reports cannot come back before that plus
	// the grace. inHistory relies on it.
	f.clk.step(at.Sub(f.clk.Now()) + DefaultDedupWindow + time.Minute)
	f.leftLive(t, fired)
	f.leftLive(t, execID)

	dup := testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate))
	f.replay(per.ID, fired, at)
	f.replay(job.ID, execID, job.CreatedAt)
	eventually(t, 10*time.Second, "six replayed reports refused as duplicates", func() bool {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate))-dup == 6
	})
	for _, id := range []string{fired, execID} {
		if v, err := c.ex.readExec(ctx, id); err != nil || v.Rec != nil {
			t.Fatalf("%s is back in ax_execs: %+v, %v", id, v.Rec, err)
		}
	}
	after, err := c.GetExecution(ctx, fired)
	if err != nil || after.State != protocol.StateSuccess || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("history of %s changed: %+v (was %+v), %v", fired, after, before, err)
	}
}

// TestRetentionRestartDoesNotRemakeEnded: a one-shot job still live
// (a triggered execution of it runs on) whose scheduled execution left
// live state does not get that execution made again by the reload at
// restart, which recreates the execution of a one-shot job missing from
// ax_execs (a creation cut short): the history index says it ended.
func TestRetentionRestartDoesNotRemakeEnded(t *testing.T) {
	f := newRetentionFixture(t)
	c, ctx := f.c, tctx(t)
	job, execID := f.oneShot(t)
	f.indexed(t, execID)
	trig, err := c.TriggerJob(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.step(DefaultDedupWindow + time.Minute)
	f.leftLive(t, execID)
	if _, err := c.GetJob(ctx, job.ID); err != nil {
		t.Fatalf("job with a live execution (%s) left: %v", trig.ExecID, err)
	}
	cfg := c.cfg
	cfg.Registry = nil
	_ = c.Close()

	c = startController(t, cfg)
	if v, err := c.ex.readExec(ctx, trig.ExecID); err != nil || v.Rec == nil {
		t.Fatalf("live execution %s after restart: %+v, %v", trig.ExecID, v.Rec, err)
	}
	if v, err := c.ex.readExec(ctx, execID); err != nil || v.Rec != nil {
		t.Fatalf("ended execution %s made again at restart: %+v, %v", execID, v.Rec, err)
	}
	if e, err := c.GetExecution(ctx, execID); err != nil || e.State != protocol.StateSuccess {
		t.Fatalf("history of %s: %+v, %v", execID, e, err)
	}
}

// TestRetentionKeysFlat is a retention soak on a stepped clock: each round
// runs 20 one-shot jobs to SUCCESS and moves the clock 15 minutes on, with
// history.retention 1h. Once the grace (2h, 8 rounds) and the retention
// have passed, the messages in ax_execs and ax_jobs, the job cache (with
// its tombstones) and the index rows stay flat instead of growing by 20 a
// round.
func TestRetentionKeysFlat(t *testing.T) {
	clk := &steppedClock{}
	cfg := testConfig(t, t.TempDir())
	cfg.Clock, cfg.monoNow, cfg.historySweep = clk, time.Now, 20*time.Millisecond
	cfg.History.Retention = time.Hour
	c := startController(t, cfg)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	ctx := tctx(t)
	msgs := func(bucket string) uint64 {
		st, err := c.js.Stream(ctx, streams.KVStream(bucket))
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	rows := func() int {
		n, err := c.hist.idx.Len(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const rounds, perRound = 16, 20
	type sample struct{ execs, jobs uint64 }
	var samples []sample
	var cache, index []int
	for r := range rounds {
		var last string
		for range perRound {
			job, err := c.CreateJob(ctx, asapJob("edge-1"))
			if err != nil {
				t.Fatal(err)
			}
			id := protocol.ExecID(job.ID, job.CreatedAt)
			run := a.waitCommand("run", isRun(id, 1)).Run
			a.runAttempt(job.ID, id, 1, run.RunAt, retry.OutcomeSuccess, ok)
			last = id
		}
		waitExec(t, c, last, "SUCCESS", inState(protocol.StateSuccess))
		eventually(t, 10*time.Second, "round's executions indexed", func() bool {
			e, ok, _ := c.hist.idx.Get(ctx, last)
			return ok && e.State.Terminal()
		})
		clk.step(15 * time.Minute)
		// From the grace on, wait for the sweeper to catch up with the step
		// (the executions of the round 2h back removed, their markers purged).
		if r >= 8 {
			eventually(t, 20*time.Second, "ax_execs down to the executions within the grace", func() bool {
				return msgs(protocol.BucketExecs) <= uint64(8*perRound)
			})
		}
		samples = append(samples, sample{msgs(protocol.BucketExecs), msgs(protocol.BucketJobs)})
		cache, index = append(cache, c.jobs.Len()), append(index, rows())
	}
	for i, s := range samples {
		t.Logf("round %2d: ax_execs %4d msgs, ax_jobs %4d msgs, job cache %4d, index rows %4d", i+1, s.execs, s.jobs, cache[i], index[i])
	}
	// Without retention round 16 holds 320 of each; with it, at most the
	// executions of the last 2h (8 rounds, one round of slack for the
	// markers a pass purges one pass later), and the index the last 1h+2h.
	bound := uint64(10 * perRound)
	for _, s := range samples[rounds-4:] {
		if s.execs > bound || s.jobs > bound {
			t.Errorf("keys not flat: %+v, bound %d", s, bound)
		}
	}
	if n := cache[rounds-1]; n > int(bound) {
		t.Errorf("job cache holds %d entries, want at most %d", n, bound)
	}
	if n := index[rounds-1]; n > 14*perRound {
		t.Errorf("index rows %d, want at most %d (grace + retention)", n, 14*perRound)
	}
}

// TestRetentionScanAfterPurge: once the sweeper has purged the last
// messages of ax_execs (the record and its marker), a scan of the bucket
// (the reload at restart and takeover) ends at the last message the
// stream holds, instead of waiting for its stall timeout for a sequence
// that is gone.
func TestRetentionScanAfterPurge(t *testing.T) {
	clk := &steppedClock{}
	var logs testutil.Buffer
	cfg := testConfig(t, t.TempDir())
	cfg.Clock, cfg.monoNow, cfg.historySweep = clk, time.Now, 20*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := startController(t, cfg)
	f := &retentionFixture{c: c, clk: clk, a: newTestAgent(t, c.NATSURL(), "edge-1", nil).start()}
	_, execID := f.oneShot(t)
	f.indexed(t, execID)
	clk.step(DefaultDedupWindow + time.Minute)
	f.leftLive(t, execID)
	eventually(t, 10*time.Second, "ax_execs empty", func() bool { return len(subjects(t, c, protocol.BucketExecs)) == 0 })
	n := 0
	if err := c.ex.scanExecs(tctx(t), func(*execRecord, uint64) { n++ }); err != nil || n != 0 {
		t.Fatalf("scan = %d records, %v", n, err)
	}
	if strings.Contains(logs.String(), "stream position not reached") {
		t.Fatalf("the scan waited for a purged sequence:\n%s", logs.String())
	}
}

// TestSweepPassTakesTheWholeBacklog: one pass of the sweeper removes every
// execution past the grace, however many batches that takes (a fixed 40
// batches a pass fell behind 500 executions a second and live state grew
// without bound), and retires their one-shot jobs in the same pass. The
// batch is one execution here, so 45 executions are 45 batches.
func TestSweepPassTakesTheWholeBacklog(t *testing.T) {
	f := newRetentionFixture(t, func(cfg *Config) {
		cfg.historySweep = 24 * time.Hour // only the pass below
		cfg.historySweepBatch = 1
	})
	c, ctx := f.c, tctx(t)
	ids, jobIDs := f.endedOneShots(t, 45)
	f.clk.step(DefaultDedupWindow + time.Minute)
	if err := c.ret.Sweep(ctx, retention.NewSweeper()); err != nil {
		t.Fatal(err)
	}
	if left := f.liveExecs(t, ids); left != 0 {
		t.Errorf("%d of %d executions past the grace still in ax_execs after one pass", left, len(ids))
	}
	if live := f.liveJobs(jobIDs); live != 0 {
		t.Errorf("%d of %d one-shot jobs still live after the pass that removed their executions", live, len(jobIDs))
	}
}

// TestSweepCatchesUpAfterABudgetCut: a pass cut by its budget with
// executions past the grace left says it is behind, and SweepAll (what the
// sweeper's loop runs every interval) goes on with passes until the
// backlog is gone, instead of leaving it for the next interval: a sweeper
// that waited a full interval after each cut pass fell behind 800
// one-shots a second and live state grew. Here the budget ends a pass
// after its first batch of one execution.
func TestSweepCatchesUpAfterABudgetCut(t *testing.T) {
	f := newRetentionFixture(t, func(cfg *Config) {
		cfg.historySweep = 24 * time.Hour // only the passes below
		cfg.historySweepBatch = 1
		cfg.historySweepBudget = time.Nanosecond
	})
	c, ctx := f.c, tctx(t)
	ids, jobIDs := f.endedOneShots(t, 6)
	f.clk.step(DefaultDedupWindow + time.Minute)
	s := retention.NewSweeper()
	if err := c.ret.Sweep(ctx, s); err != nil {
		t.Fatal(err)
	}
	if left := f.liveExecs(t, ids); left != len(ids)-1 {
		t.Fatalf("%d of %d executions left after a pass cut after one batch of one, want %d", left, len(ids), len(ids)-1)
	}
	if !s.Behind() {
		t.Fatal("a pass cut by its budget with a backlog left does not say it is behind")
	}
	if err := c.ret.SweepAll(ctx, s); err != nil {
		t.Fatal(err)
	}
	if left := f.liveExecs(t, ids); left != 0 {
		t.Errorf("%d of %d executions past the grace still in ax_execs after SweepAll", left, len(ids))
	}
	if live := f.liveJobs(jobIDs); live != 0 {
		t.Errorf("%d of %d one-shot jobs still live after SweepAll", live, len(jobIDs))
	}
	if s.Behind() {
		t.Error("the sweeper says it is behind after the pass that took the last of the backlog")
	}
	// Six passes cut after one execution each, the seventh finds none.
	for _, m := range []struct {
		vec         *prometheus.CounterVec
		label, name string
		want        int
	}{
		{c.m.retPasses, retention.EndedBudget, "passes ended on the budget", len(ids)},
		{c.m.retPasses, retention.EndedDone, "passes that took every execution", 1},
		{c.m.retRemoved, retention.KindExecution, "executions removed", len(ids)},
		{c.m.retRemoved, retention.KindJob, "jobs retired", len(ids)},
	} {
		if got := int(promtest.ToFloat64(m.vec.WithLabelValues(m.label))); got != m.want {
			t.Errorf("metrics: %d %s, want %d", got, m.name, m.want)
		}
	}
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

// TestRetentionPurgesDeletedJobs: an operator's delete of a job leaves a
// delete marker in ax_jobs, which a reload reads while the job has live
// executions (the runs of a deleted job). Once every execution of the job
// has left live state, the sweeper purges the marker: deleted jobs leave
// nothing in the stream. Deleted while its execution is live (a one-shot
// in its grace) or after its executions left (a periodic job), both go;
// a job whose execution is still PENDING keeps its marker. The deleted
// job's idempotency key leaves ax_idem at once.
func TestRetentionPurgesDeletedJobs(t *testing.T) {
	f := newRetentionFixture(t)
	c, ctx := f.c, tctx(t)
	w := f.mixedWork(t)
	once, onceExec, per, fired, pending := w.once, w.onceExec, w.per, w.fired, w.pending
	marker := func(id string) uint64 {
		return subjects(t, c, protocol.BucketJobs)[streams.KVSubject(protocol.BucketJobs, id)]
	}

	// The one-shot job deleted within its execution's grace: its marker
	// stays while the execution is live.
	if err := c.DeleteJob(ctx, once.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteJob(ctx, pending.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.ret.Sweep(ctx, retention.NewSweeper()); err != nil {
			t.Fatal(err)
		}
	}
	if marker(once.ID) != 1 || marker(pending.ID) != 1 {
		t.Fatalf("delete markers %d / %d before the executions left, want 1 / 1", marker(once.ID), marker(pending.ID))
	}
	// The deleted job's idempotency key is released (its purge marker
	// leaves ax_idem by its TTL: retention's TestMarkersCarryTheTTL) and
	// can be claimed again at once, over the marker; the claim is then
	// the one message on the key.
	again := asapJob("edge-1")
	again.IdempotencyKey = once.IdempotencyKey
	if _, err := c.CreateJob(ctx, again); err != nil {
		t.Errorf("create with the released idempotency key: %v", err)
	}
	idemSubject := streams.KVSubject(protocol.BucketIdem, streams.IdemKey(once.IdempotencyKey))
	if n := subjects(t, c, protocol.BucketIdem)[idemSubject]; n != 1 {
		t.Errorf("ax_idem holds %d messages on the key claimed again, want 1", n)
	}

	// Past the grace both executions leave; the periodic job is deleted
	// after its execution left.
	f.clk.step(DefaultDedupWindow + time.Minute)
	f.leftLive(t, onceExec)
	f.leftLive(t, fired)
	if err := c.DeleteJob(ctx, per.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the delete markers of the jobs whose executions left purged", func() bool {
		return marker(once.ID) == 0 && marker(per.ID) == 0
	})
	// The job whose execution is PENDING keeps its marker: a reload finds
	// its run belongs to a deleted job.
	if marker(pending.ID) != 1 {
		t.Errorf("delete marker of the job with a PENDING execution: %d, want 1", marker(pending.ID))
	}
	// Gone is gone: neither comes back as a live job.
	for _, id := range []string{once.ID, per.ID, pending.ID} {
		if _, err := c.GetJob(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetJob(%s) after its delete: %v, want ErrNotFound", id, err)
		}
	}
}

// TestRetentionPurgesMarkersFoundAtStart: a delete marker in ax_jobs that
// no sweeper was told of (an earlier version's delete, or one whose purge
// a crash cut off; here a raw KV delete made while no controller ran) is
// found by the next start's job load and purged once the job's executions
// have all left. (A running controller sees any delete, a raw one too,
// through its job watcher: the test made its raw delete while the
// controller ran until stop 49, and failed when the watcher was quicker
// than its three sweeps.)
func TestRetentionPurgesMarkersFoundAtStart(t *testing.T) {
	f := newRetentionFixture(t)
	c, ctx := f.c, tctx(t)
	per := f.periodic(t)
	fired, _ := f.fire(t, per)
	f.indexed(t, fired)
	f.clk.step(DefaultDedupWindow + time.Minute)
	f.leftLive(t, fired)

	// The marker is made while no controller runs (a raw KV delete on
	// the store, through a bare server): a running one would see it
	// through its job watcher and tell its sweeper.
	cfg := c.cfg
	cfg.Registry = nil
	_ = c.Close()
	subject := streams.KVSubject(protocol.BucketJobs, per.ID)
	bare := natstest.Start(t, func(o *server.Options) { o.StoreDir = cfg.DataDir })
	nc, err := nats.Connect(bare.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, per.ID); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, streams.KVStream(protocol.BucketJobs))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetLastMsgForSubject(ctx, subject); err != nil || m.Header.Get("KV-Operation") != "DEL" {
		t.Fatalf("the raw delete's marker: %v (%v)", m, err)
	}
	nc.Close()
	bare.Stop()

	c = startController(t, cfg)
	eventually(t, 10*time.Second, "the marker found at the start purged", func() bool {
		return subjects(t, c, protocol.BucketJobs)[subject] == 0
	})
}
