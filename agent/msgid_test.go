package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestReportMsgIDSalted: the Msg-Id of a report in the outbox is not the
// guessable exec_id/attempt/kind alone, but prefixed with a salt of the
// agent process: AX_RPT de-duplicates by Msg-Id across agents, and
// another agent publishing the guessable id first must not have this
// agent's report dropped as its duplicate.
func TestReportMsgIDSalted(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, b := newStopped(t, testConfig(t, "edge-s", "nats://127.0.0.1:1")), newStopped(t, testConfig(t, "edge-s", "nats://127.0.0.1:1"))
	j := newJob("edge-s", "noop", schedule.Spec{Every: "1s"}, nil)
	r := protocol.Report{JobID: j.ID, ExecID: protocol.ExecID(j.ID, start), Attempt: 1, Kind: protocol.ReportTriggered, ScheduledAt: start}
	ea, err := a.encodeReport(r)
	must(t, err)
	eb, err := b.encodeReport(r)
	must(t, err)
	if ea.MsgID == r.MsgID() || !strings.HasSuffix(ea.MsgID, "/"+r.MsgID()) {
		t.Fatalf("msg id %q: want a salt before %q", ea.MsgID, r.MsgID())
	}
	if ea.MsgID == eb.MsgID {
		t.Fatalf("two agent processes gave the same msg id %q", ea.MsgID)
	}
	if again, _ := a.encodeReport(r); again.MsgID != ea.MsgID {
		t.Fatalf("the same report got msg ids %q and %q in one process", ea.MsgID, again.MsgID)
	}
}
