package streams

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// BenchmarkReportPublish: reports published into AX_RPT (file storage,
// async with Msg-Ids, 16 shards × 8 agents) with and without the bound per
// subject, which costs the server one look-up of the subject per report.
// The bound is set far above what the run stores, so nothing is refused.
func BenchmarkReportPublish(b *testing.B) {
	for _, perSubject := range []int64{0, 1 << 40} {
		b.Run(fmt.Sprintf("max_per_subject=%d", perSubject), func(b *testing.B) {
			_, js := natstest.JetStream(b, natstest.Start(b).URL())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sc := streamConfig(b, Config{}, protocol.StreamReports)
			sc.MaxMsgsPerSubject, sc.DiscardNewPerSubject = perSubject, perSubject > 0
			if perSubject == 0 {
				sc.MaxMsgsPerSubject = -1
			}
			if _, err := js.CreateStream(ctx, sc); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 300)
			b.ResetTimer()
			publishAll(ctx, b, js, func(i int) (string, []byte, []jetstream.PublishOpt) {
				subj := protocol.ReportSubject(i%16, "edge-"+strconv.Itoa(i/16%8))
				return subj, body, []jetstream.PublishOpt{jetstream.WithMsgID("r/" + strconv.Itoa(i))}
			})
		})
	}
}

// BenchmarkEventSubjectMemory: the embedded server's heap per event of a
// distinct one-shot job stored in AX_EVT (file storage), with the stream's
// subject transform (events of all jobs on 16 partitions per state) and
// without it (a subject per job, as before 2026-12-05). The server keeps an
// index entry per subject a stream holds for as long as it holds it
// (history.retention, 7 days by default). Reported: heap-B/event, the
// live heap after a collection, less the same before the publishes, per
// event (the client's side of the publishes is gone by then).
func BenchmarkEventSubjectMemory(b *testing.B) {
	for _, transform := range []bool{true, false} {
		b.Run(fmt.Sprintf("transform=%v", transform), func(b *testing.B) {
			_, js := natstest.JetStream(b, natstest.Start(b).URL())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sc := streamConfig(b, Config{}, protocol.StreamEvents)
			if !transform {
				sc.SubjectTransform = nil
			}
			if _, err := js.CreateStream(ctx, sc); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 100)
			before := liveHeap()
			b.ResetTimer()
			publishAll(ctx, b, js, func(i int) (string, []byte, []jetstream.PublishOpt) {
				return protocol.EventSubject(protocol.StateSuccess, fmt.Sprintf("ax-ctl-20261205120000-%08d", i)), body, nil
			})
			b.StopTimer()
			b.ReportMetric(float64(int64(liveHeap())-int64(before))/float64(b.N), "heap-B/event")
		})
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// publishAll publishes b.N messages, message i as msg(i) gives it,
// asynchronously, waiting for the acks of each 256.
func publishAll(ctx context.Context, b *testing.B, js jetstream.JetStream, msg func(i int) (string, []byte, []jetstream.PublishOpt)) {
	futs := make([]jetstream.PubAckFuture, 0, 256)
	for i := range b.N {
		subj, data, opts := msg(i)
		f, err := js.PublishAsync(subj, data, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if futs = append(futs, f); len(futs) < cap(futs) && i < b.N-1 {
			continue
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
		futs = futs[:0]
	}
}

// BenchmarkEnsureExisting: Ensure on a server whose streams and buckets
// already have the config asked for, as at every start of a controller
// after its first (file storage). Reported: updates/op, the stream updates
// the server was asked to make (each rewrites the stream's meta file, and
// one of a stream with a MaxAge reads its first message block).
func BenchmarkEnsureExisting(b *testing.B) {
	srv := natstest.Start(b)
	_, js := natstest.JetStream(b, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		b.Fatal(err)
	}
	updates := countUpdates(b, srv)
	for b.Loop() {
		if _, err := Ensure(ctx, js, Config{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(updates(0))/float64(b.N), "updates/op")
}
