package auth_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// TestReportFloodOfOneAgent: an enrolled agent publishing reports as fast
// as its key lets it fills its own subjects of AX_RPT (one per shard, each
// bounded by ReportMaxPerSubject), not the stream: past the bound its
// reports are refused, and another agent's report is still taken. No
// controller consumes here, so nothing drains what the flood stored.
// Without the per-subject bound the flood is taken until the stream's
// byte bound, and the other agent's report is refused.
func TestReportFloodOfOneAgent(t *testing.T) {
	e := newEnv(t, "flooder", "victim")
	const perSubject = streams.MinReportMaxPerSubject
	cfg := streams.Config{ReportMaxBytes: 32 << 20, ReportMaxPerSubject: perSubject}
	if _, err := streams.Ensure(ctx(t), e.ajs, cfg); err != nil {
		t.Fatal(err)
	}
	flooder := e.mustConnect("flooder")
	junk := make([]byte, 16<<10) // the flood's 2,048 × 16 KiB: the stream's bound without the per-subject one
	accepted, refused := 0, 0
	for i := range 2 * protocol.DefaultShards * perSubject {
		subj := protocol.ReportSubject(i%protocol.DefaultShards, "flooder")
		_, err := flooder.js.Publish(ctx(t), subj, junk, jetstream.WithMsgID("flood/"+strconv.Itoa(i)))
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			accepted++
		case errors.As(err, &apiErr):
			refused++
		default:
			t.Fatalf("flood publish %d: %v", i, err)
		}
	}
	if want := protocol.DefaultShards * perSubject; accepted != want {
		t.Fatalf("the flood's reports taken: %d, want %d (%d shards × %d a subject); refused %d", accepted, want, protocol.DefaultShards, perSubject, refused)
	}
	victim := e.mustConnect("victim")
	if _, err := victim.js.Publish(ctx(t), protocol.ReportSubject(3, "victim"), junk, jetstream.WithMsgID("victim/1")); err != nil {
		t.Fatalf("another agent's report during the flood: %v", err)
	}
	st, err := e.ajs.Stream(ctx(t), protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx(t), jetstream.WithSubjectFilter(protocol.ReportSubject(0, "flooder")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[protocol.ReportSubject(0, "flooder")]; n != perSubject {
		t.Fatalf("the flooder's shard 0 holds %d reports, want %d", n, perSubject)
	}
	t.Logf("flood: %d taken, %d refused; the other agent's report taken", accepted, refused)
}
