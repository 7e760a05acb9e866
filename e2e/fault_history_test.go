package e2e

import (
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// TestHistoryOrderCheck: the fault reconciliation's history check flags an
// execution whose stored events go back (a step of an attempt after its
// end, an attempt after a later one, a create's PENDING event after a
// later step) and leaves alone one in order.
func TestHistoryOrderCheck(t *testing.T) {
	ev := func(attempt int, to protocol.State) protocol.Event {
		return protocol.Event{ExecID: "x", Attempt: attempt, To: to}
	}
	for _, tc := range []struct {
		name   string
		events []protocol.Event
		bad    bool
	}{
		{"in order, a retry", []protocol.Event{ev(1, protocol.StatePending), ev(1, protocol.StateRunning), ev(1, protocol.StateRetryWaiting),
			ev(2, protocol.StateTriggered), ev(2, protocol.StateRunning), ev(2, protocol.StateSuccess)}, false},
		{"steps left out (one event per report)", []protocol.Event{ev(1, protocol.StateSuccess)}, false},
		{"PENDING stored late", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StatePending)}, true},
		{"a step replayed after the attempt's end", []protocol.Event{ev(1, protocol.StateRetryWaiting), ev(2, protocol.StateSuccess),
			ev(2, protocol.StateRunning)}, true},
		{"an attempt after a later one", []protocol.Event{ev(2, protocol.StateTriggered), ev(1, protocol.StateRetryWaiting)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := reconcile(faultData{events: tc.events})
			if got := rep.count(vHistory) > 0; got != tc.bad {
				t.Errorf("history violations %d, want any: %v (%v)", rep.count(vHistory), tc.bad, rep.violations[vHistory])
			}
		})
	}
}
