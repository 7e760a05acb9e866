package controller

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// BenchmarkRetentionSweep measures what the retention sweeper costs for
// a dispatched one-shot job once its grace has passed: the execution's
// record and the job leave ax_execs and ax_jobs (the markers, the job's
// retirement in history, the purges), until neither stream holds a
// message. One op is one pinned one-shot job run to SUCCESS before the
// clock starts (created in batches, one coalesced finished report each);
// the wall clock is then stepped past the grace and the sweeper, every
// 20ms, takes the backlog. cpu-µs/job is the whole process's CPU
// (controller and embedded server) per job; jobs/s is how fast a backlog
// leaves, the rate a steady dispatch load must stay under for live state
// not to grow.
//
//	go test -run '^$' -bench BenchmarkRetentionSweep -benchtime 20000x ./controller/
func BenchmarkRetentionSweep(b *testing.B) {
	clk := &steppedClock{}
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Clock = clk
	cfg.monoNow = time.Now
	cfg.historySweep = 20 * time.Millisecond
	cfg.Reports.MaxPerSubject = 1 << 40
	c := startController(b, cfg)
	a := newTestAgent(b, c.NATSURL(), "bench", nil)
	a.register()
	ctx := context.Background()
	js, err := jetstream.New(a.nc, jetstream.WithPublishAsyncMaxPending(1024),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			b.Errorf("report %s refused: %v", m.Header.Get(jetstream.MsgIDHeader), err)
		}))
	if err != nil {
		b.Fatal(err)
	}
	for done := 0; done < b.N; {
		n := min(MaxBatchJobs, b.N-done)
		specs := make([]protocol.Job, n)
		for i := range specs {
			specs[i] = asapJob("bench")
		}
		res, err := c.CreateJobs(ctx, specs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			j := r.Job
			id := protocol.ExecID(j.ID, j.CreatedAt)
			rep := finished(a.rep(j.ID, id, 1, protocol.ReportFinished, j.CreatedAt), retry.OutcomeSuccess, ok, time.Millisecond)
			rep.TriggeredAt, rep.StartedAt = rep.At, rep.At
			data, err := protocol.Encode(rep)
			if err != nil {
				b.Fatal(err)
			}
			subj := protocol.ReportSubject(protocol.Shard(j.ID, a.shards), a.id)
			if _, err := js.PublishAsync(subj, data, jetstream.WithMsgID(a.id+"/"+rep.MsgID())); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		done += n
	}
	all := make([]int, cfg.Shards)
	for i := range all {
		all[i] = i
	}
	eventually(b, 5*time.Minute, "every execution terminal in the history index", func() bool {
		e, err := c.hist.idx.EndedBefore(ctx, clk.Now().Add(time.Hour), all, b.N+1)
		return err == nil && len(e) == b.N
	})
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	clk.step(c.liveGrace() + time.Minute)
	eventually(b, 10*time.Minute, "ax_execs and ax_jobs empty", func() bool {
		return streamMsgs(b, c, protocol.BucketExecs) == 0 && streamMsgs(b, c, protocol.BucketJobs) == 0
	})
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
}

// streamMsgs returns how many messages the stream of KV bucket bucket
// holds.
func streamMsgs(b *testing.B, c *Controller, bucket string) uint64 {
	st, err := c.js.Stream(context.Background(), streams.KVStream(bucket))
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return info.State.Msgs
}
