package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

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
