package agent

import (
	"testing"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// TestCoalesce: a triggered or running report is not sent when a later
// report of the same attempt is in the window.
func TestCoalesce(t *testing.T) {
	msg := func(exec string, kind protocol.ReportKind) store.OutboxMsg {
		return store.OutboxMsg{MsgID: protocol.ReportMsgID(exec, 1, kind)}
	}
	tests := []struct {
		name string
		msgs []store.OutboxMsg
		want []bool
	}{
		{"whole attempt", []store.OutboxMsg{msg("a", "triggered"), msg("a", "running"), msg("a", "finished")}, []bool{true, true, false}},
		{"still running", []store.OutboxMsg{msg("a", "triggered"), msg("a", "running")}, []bool{true, false}},
		{"only triggered", []store.OutboxMsg{msg("a", "triggered")}, []bool{false}},
		{"interleaved", []store.OutboxMsg{msg("a", "triggered"), msg("b", "triggered"), msg("a", "finished"), msg("b", "skipped")},
			[]bool{true, false, false, false}},
		{"interrupted", []store.OutboxMsg{msg("a", "running"), msg("a", "interrupted")}, []bool{true, false}},
		{"other attempt", []store.OutboxMsg{{MsgID: protocol.ReportMsgID("a", 1, "triggered")}, {MsgID: protocol.ReportMsgID("a", 2, "finished")}},
			[]bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := coalesce(tc.msgs)
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("skip = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
