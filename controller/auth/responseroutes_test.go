package auth_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestReportRoutesExpire: the server keeps the route of a report's reply
// back to the agent's account for ReportResponseThreshold, not its default
// of 2 minutes, when nothing answers (here a subscriber that never replies;
// under a flood, reports the stream's full ingest queue drops): a key
// publishing without pause cannot pile up routes for minutes.
func TestReportRoutesExpire(t *testing.T) {
	e := newEnv(t, "flooder")
	acc, err := e.srv.LookupAccount(auth.AccountAX)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := acc.ServiceExportResponseThreshold("ax.rpt.*.*"); err != nil || d != auth.ReportResponseThreshold {
		t.Fatalf("response threshold of ax.rpt.*.*: %v, %v; want %v", d, err, auth.ReportResponseThreshold)
	}
	// A token AX_RPT does not take, read by a subscriber that never answers.
	subject := protocol.ReportSubject(999, "flooder")
	sub, err := e.admin.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	a := e.mustConnect("flooder")
	const n = 100
	for i := range n {
		if err := a.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: "_INBOX_ax.flooder.r" + string(rune('a'+i%26)), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the routes of the unanswered reports", func() bool { return acc.NumPendingResponses("ax.rpt.*.*") >= n })
	start := time.Now()
	testutil.Eventually(t, 30*time.Second, "the routes expired", func() bool { return acc.NumPendingResponses("ax.rpt.*.*") == 0 })
	t.Logf("%d routes gone %s after they were all made", n, time.Since(start).Round(time.Millisecond))
}
