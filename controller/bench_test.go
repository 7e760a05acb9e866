package controller

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// BenchmarkReportsApplied measures how many agent reports per second the
// controller applies to the state machine (KV compare-and-set write, event,
// ack), with the embedded server and its file store. One benchmark op is
// one execution: a pre-built triple (triggered, running, finished success)
// published into AX_RPT; the clock stops when all are applied.
func BenchmarkReportsApplied(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ackWait = DefaultAckWait
	c := startController(b, cfg)
	ctx := context.Background()
	a := newTestAgent(b, c.NATSURL(), "bench", nil)
	a.register()
	const jobs = 64
	var ids []protocol.Job
	for range jobs {
		j, err := c.CreateJob(ctx, everyJob("bench", "1s"))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j)
	}
	type msg struct {
		subj, id string
		data     []byte
	}
	msgs := make([]msg, 0, 3*b.N)
	now := time.Now()
	for i := range b.N {
		j := ids[i%jobs]
		at := j.CreatedAt.Add(time.Duration(i/jobs+1) * time.Second)
		id := protocol.ExecID(j.ID, at)
		for _, r := range []protocol.Report{
			a.rep(j.ID, id, 1, protocol.ReportTriggered, at),
			a.rep(j.ID, id, 1, protocol.ReportRunning, at),
			finished(a.rep(j.ID, id, 1, protocol.ReportFinished, at), retry.OutcomeSuccess, ok, time.Millisecond),
		} {
			r.At = now
			data, err := protocol.Encode(r)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, msg{subj: protocol.ReportSubject(protocol.Shard(j.ID, a.shards), a.id), id: r.MsgID(), data: data})
		}
	}
	base := c.m.applied.Load()
	b.ResetTimer()
	start := time.Now()
	js, err := jetstream.New(a.nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		b.Fatal(err)
	}
	for i, m := range msgs {
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
		if _, err := js.PublishAsync(m.subj, m.data, jetstream.WithMsgID(m.id)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publish did not complete")
	}
	b.Logf("published %d in %v; applied so far %d", len(msgs), time.Since(start), c.m.applied.Load()-base)
	want := base + int64(3*b.N)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(5 * time.Minute)
	for c.m.applied.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("applied %d of %d", c.m.applied.Load()-base, 3*b.N)
		}
		<-tick.C
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// Redeliveries (a message buffered longer than the ack wait) are
	// harmless duplicates; anything else rejected is a bug.
	dups := val(b, c.m.reportsRejected.WithLabelValues(rejectDuplicate))
	if r := float64(c.m.rejected.Load()) - dups; r != 0 {
		b.Fatalf("%v reports rejected other than duplicates", r)
	}
	b.ReportMetric(dups, "redelivered")
	b.ReportMetric(float64(3*b.N)/elapsed.Seconds(), "reports/s")
}
