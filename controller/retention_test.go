package controller

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

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
