package streams

import (
	"context"
	"fmt"
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
			futs := make([]jetstream.PubAckFuture, 0, 256)
			for i := range b.N {
				subj := protocol.ReportSubject(i%16, "edge-"+strconv.Itoa(i/16%8))
				f, err := js.PublishAsync(subj, body, jetstream.WithMsgID("r/"+strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				if futs = append(futs, f); len(futs) == cap(futs) || i == b.N-1 {
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
		})
	}
}
