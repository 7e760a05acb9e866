package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestReportMsgIDSalted: the Msg-Id of a report in the outbox is not the
// guessable exec_id/attempt/kind alone, but prefixed with a salt of the
// agent process: AX_RPT de-duplicates by Msg-Id across agents, and
// another agent publishing the guessable id first must not have this
// agent's report dropped as its duplicate.
func TestReportMsgIDSalted(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := newOffline(t, offlineConfig(t, "edge-s"), start).a
	b := newOffline(t, offlineConfig(t, "edge-s"), start).a
	j := groupJob("edge-s", "1s", protocol.ModeAny)
	r := protocol.Report{JobID: j.ID, ExecID: protocol.ExecID(j.ID, start), Attempt: 1, Kind: protocol.ReportTriggered, ScheduledAt: start}
	ea, err := a.encodeReport(r)
	must(t, err)
	eb, err := b.encodeReport(r)
	must(t, err)
	if ea.msgID == r.MsgID() || !strings.HasSuffix(ea.msgID, "/"+r.MsgID()) {
		t.Fatalf("msg id %q: want a salt before %q", ea.msgID, r.MsgID())
	}
	if ea.msgID == eb.msgID {
		t.Fatalf("two agent processes gave the same msg id %q", ea.msgID)
	}
	if again, _ := a.encodeReport(r); again.msgID != ea.msgID {
		t.Fatalf("the same report got msg ids %q and %q in one process", ea.msgID, again.msgID)
	}
}
