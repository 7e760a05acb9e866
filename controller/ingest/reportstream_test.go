package ingest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// The report stream's upkeep alone, on a real nats-server: the tests of
// whole controllers whose reports are rejected or left behind by a kill
// are the controller package's (TestForgedReportsRejected,
// TestKill9LeavesNoAckedReports).

// newReportStreamIngest returns the report ingest of a nats-server (file
// storage in a temporary dir) with AX_RPT, the report consumers, and the
// lease of shard 0 (held, with the other shards' leases, by a started
// ownership whose host starts no worker): no shard worker reads the
// reports, so what the upkeep leaves in AX_RPT stays there.
func newReportStreamIngest(t *testing.T) *Ingest {
	t.Helper()
	nc, js := natstest.JetStream(t, natstest.Start(t).URL())
	ctx := testutil.Context(t, 60*time.Second)
	b, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics{
		ReportsApplied:     prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_reports_applied_total"}),
		ReportsRejected:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_reports_rejected_total"}, []string{"reason"}),
		Deferred:           prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_reports_deferred_total"}),
		Applied:            new(atomic.Int64),
		Rejected:           new(atomic.Int64),
		StreamBytes:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_report_stream_bytes"}),
		StreamMaxBytes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_report_stream_max_bytes"}),
		StreamMsgs:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_report_stream_messages"}),
		StreamOldest:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_report_stream_oldest_seconds"}),
		StreamMaxAge:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_report_stream_max_age_seconds"}),
		StreamAckedRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_report_stream_acked_removed_total"}),
	}
	clk := clock.Real{}
	now := func() time.Time { return clk.Now().UTC().Round(0) }
	loopCtx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	own := lease.NewOwnership(lease.OwnershipEnv{
		Config: lease.OwnershipConfig{Node: "report-stream-test", Shards: protocol.DefaultShards, LeaseTTL: 15 * time.Second,
			LeaseRenewInterval: 5 * time.Second},
		Log: testutil.Logger(), Metrics: lease.OwnershipMetrics{
			ShardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_shards_owned"}),
			Takeovers:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_lease_takeovers_total"}, []string{"kind"})},
		Clock: clk, Now: now, Mono: clk.Now,
		GoRun: func(fn func(context.Context)) {
			loops.Add(1)
			go func() { defer loops.Done(); fn(loopCtx) }()
		},
		Leases: lease.NewView(), Instance: "report-stream-test", Started: now(),
	}, workerlessHost{})
	own.Start(ctx, b.Leases)
	t.Cleanup(func() { own.HandOver(); cancel(); loops.Wait() }) // before the server stops
	if !own.Owns(0) {
		t.Fatalf("shard 0 not owned after the ownership's start (owned %v)", own.OwnedShards())
	}
	c := New(Env{
		Config: Config{Shards: protocol.DefaultShards, AckWait: 2 * time.Second, LeaseTTL: 15 * time.Second, Replicas: 1},
		Log:    testutil.Logger(), Metrics: m, Now: now, Mono: clk.Now, Own: own,
	}, nil)
	c.Attach(loopCtx, nc, js, execstore.Store{})
	if err := c.EnsureConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// workerlessHost is an ownership host that starts no report worker and
// has nothing to reload, forget, manage or place.
type workerlessHost struct{}

func (workerlessHost) StartShardWorker(context.Context, int) (lease.ShardWorker, error) {
	return idleWorker{}, nil
}
func (workerlessHost) ReloadExecutions(context.Context, map[int]bool) error { return nil }
func (workerlessHost) ForgetShard(int)                                      {}
func (workerlessHost) ManageGroupLeases(context.Context, time.Time)         {}
func (workerlessHost) PlaceWaiting(context.Context, time.Time)              {}

// idleWorker stands for a report worker that reads nothing.
type idleWorker struct{}

func (idleWorker) Stop(bool, time.Duration) {}

// TestReportStreamRemovesAcked: reports left in AX_RPT at or below their
// consumer's ack floor (what a kill -9 of the embedded server leaves, see
// TestKill9LeavesNoAckedReports; made here by resetting the consumer past
// them) are removed by the upkeep at its second look and counted; the
// reports above the floor, not yet delivered or delivered and not
// acknowledged, stay and are delivered.
func TestReportStreamRemovesAcked(t *testing.T) {
	c := newReportStreamIngest(t)
	ctx := testutil.Context(t, 60*time.Second)
	js := c.js
	publish := func(shard int) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, protocol.ReportSubject(shard, "edge-1"), []byte("report"))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	// Shard 3: 1..4, shard 5 interleaved: 5, 6 on shard 3, 7 on shard 5.
	var ghosts3, ghosts5 []uint64
	for range 2 {
		ghosts3 = append(ghosts3, publish(3))
		ghosts5 = append(ghosts5, publish(5))
	}
	ghosts3 = append(ghosts3, publish(3))
	// The consumers' ack floors move past them: the state a kill -9 leaves
	// (the floor stored, the work queue's removal lost).
	next3, next5 := publish(3), publish(5)
	for shard, next := range map[int]uint64{3: next3, 5: next5} {
		if _, err := js.ResetConsumerToSequence(ctx, protocol.StreamReports, ConsumerName(shard), next); err != nil {
			t.Fatalf("reset %s: %v", ConsumerName(shard), err)
		}
	}
	cons3, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(3))
	if err != nil {
		t.Fatal(err)
	}
	// Above shard 3's floor: one delivered and not acknowledged, one
	// delivered and acknowledged, one not delivered yet.
	deliverable := []uint64{publish(3), publish(3), publish(3)}
	first := fetch(t, cons3, 3)
	if len(first) != 3 || first[0].seq != next3 {
		t.Fatalf("shard 3 delivered %v, want %d (the report it was reset to) first", first, next3)
	}
	// first[0] (the report reset to) is acknowledged, first[1] not,
	// first[2] acknowledged: the floor is first[0].
	for _, i := range []int{0, 2} {
		if err := first[i].msg.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	keep := []uint64{next5, first[1].seq, deliverable[2]} // shard 5: next5 not delivered yet
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() []uint64 {
		t.Helper()
		var seqs []uint64
		for seq := uint64(1); ; seq++ {
			m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(protocol.SubjectReportsAll))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return seqs
			}
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, m.Sequence)
			seq = m.Sequence
		}
	}
	want := slices.Sorted(slices.Values(append(append(append([]uint64{}, ghosts3...), ghosts5...), keep...)))
	if got := stored(); !slices.Equal(got, want) {
		t.Fatalf("AX_RPT holds %v before the upkeep, want %v", got, want)
	}
	// The first look records the floors, the second removes what is at
	// or below them.
	floors := ackFloors{}
	if err := c.reportStreamStep(ctx, floors); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, want) {
		t.Fatalf("AX_RPT holds %v after the upkeep's first look, want %v", got, want)
	}
	if err := c.reportStreamStep(ctx, floors); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, keep) {
		t.Fatalf("AX_RPT holds %v after the upkeep, want only the reports above the floors %v (ghosts %v, %v)", got, keep, ghosts3, ghosts5)
	}
	if got, want := testutil.MetricValue(t, c.m.StreamAckedRemoved), float64(len(ghosts3)+len(ghosts5)); got != want {
		t.Fatalf("%s = %v, want %v", "ax_report_stream_acked_removed_total", got, want)
	}
	// Again: nothing more to remove.
	if err := c.reportStreamStep(ctx, floors); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, keep) {
		t.Fatalf("AX_RPT holds %v after a second upkeep, want %v", got, keep)
	}
	// The reports left are still delivered: the one not acknowledged
	// after the ack wait, the others for the first time.
	cons5, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(5))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	testutil.Eventually(t, 30*time.Second, "the reports above the floors delivered", func() bool {
		for _, cons := range []jetstream.Consumer{cons3, cons5} {
			for _, d := range fetch(t, cons, 2) {
				if err := d.msg.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
				got = append(got, d.seq)
			}
		}
		return len(got) >= len(keep)
	})
	slices.Sort(got)
	if !slices.Equal(got, keep) {
		t.Fatalf("delivered %v after the upkeep, want %v", got, keep)
	}
	if got := stored(); len(got) != 0 {
		t.Fatalf("AX_RPT holds %v once every report is acknowledged", got)
	}
}

// delivered is a report a consumer delivered and its stream sequence.
type delivered struct {
	msg jetstream.Msg
	seq uint64
}

// fetch pulls up to n reports from cons, waiting at most a second.
func fetch(t *testing.T, cons jetstream.Consumer, n int) []delivered {
	t.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []delivered
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, delivered{m, md.Sequence.Stream})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Fatal(err)
	}
	return out
}

// TestReportStreamPurgesUnreadTokensOfAnOldStream: AX_RPT takes the shard
// tokens a consumer reads only, but a stream an earlier version made took
// every ax.rpt subject, and may still hold reports on other tokens after
// its update. The upkeep purges those (counted bad_shard) and leaves the
// reports on read tokens alone.
func TestReportStreamPurgesUnreadTokensOfAnOldStream(t *testing.T) {
	c := newReportStreamIngest(t)
	ctx := testutil.Context(t, 60*time.Second)
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if len(cfg.Subjects) != protocol.DefaultShards || cfg.Subjects[3] != protocol.ReportShardSubject(3) {
		t.Fatalf("AX_RPT subjects %v, want the %d read shard tokens", cfg.Subjects, protocol.DefaultShards)
	}
	old := cfg
	old.Subjects = []string{protocol.SubjectReportsAll} // as an earlier version made it
	if _, err := c.js.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"ax.rpt.999.edge-m", "ax.rpt.x.edge-m", protocol.ReportSubject(3, "edge-1")} {
		if _, err := c.js.Publish(ctx, subj, []byte("report")); err != nil {
			t.Fatalf("publish on %s: %v", subj, err)
		}
	}
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil { // the next start's Ensure
		t.Fatal(err)
	}
	if err := c.reportStreamStep(ctx, ackFloors{}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectReportsAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 || info.State.Subjects[protocol.ReportSubject(3, "edge-1")] != 1 {
		t.Fatalf("AX_RPT holds %v after the upkeep, want only the report on shard 3", info.State.Subjects)
	}
	if got := c.m.Rejected.Load(); got != 2 {
		t.Fatalf("%d reports counted rejected, want the 2 purged (bad_shard)", got)
	}
}
