package e2e

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestHistoryOrderCheck: the fault reconciliation's history check flags an
// execution whose stored events go back (a step of an attempt after its
// end, an attempt after a later one, a create's PENDING event after a
// later step unless its controller stalled just after the create) and
// leaves alone one in order.
func TestHistoryOrderCheck(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	ev := func(attempt int, to protocol.State) protocol.Event {
		return protocol.Event{ExecID: "ax-fault-1-20261207100000-abcdef-1", Attempt: attempt, To: to, At: t0}
	}
	for _, tc := range []struct {
		name   string
		events []protocol.Event
		stalls map[string][]time.Time
		bad    bool
	}{
		{"in order, a retry", []protocol.Event{ev(1, protocol.StatePending), ev(1, protocol.StateRunning), ev(1, protocol.StateRetryWaiting),
			ev(2, protocol.StateTriggered), ev(2, protocol.StateRunning), ev(2, protocol.StateSuccess)}, nil, false},
		{"steps left out (one event per report)", []protocol.Event{ev(1, protocol.StateSuccess)}, nil, false},
		{"PENDING stored late", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StatePending)}, nil, true},
		{"PENDING stored late, another controller stalled", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StatePending)},
			map[string][]time.Time{"fault-2": {t0.Add(time.Second)}}, true},
		{"PENDING stored late, its controller stalled long after", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StatePending)},
			map[string][]time.Time{"fault-1": {t0.Add(3 * time.Second)}}, true},
		{"PENDING stored late, its controller stalled just after the create", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StatePending)},
			map[string][]time.Time{"fault-1": {t0.Add(700 * time.Millisecond)}}, false},
		{"a step stored late, its controller stalled", []protocol.Event{ev(1, protocol.StateSuccess), ev(1, protocol.StateRunning)},
			map[string][]time.Time{"fault-1": {t0.Add(700 * time.Millisecond)}}, true},
		{"a step replayed after the attempt's end", []protocol.Event{ev(1, protocol.StateRetryWaiting), ev(2, protocol.StateSuccess),
			ev(2, protocol.StateRunning)}, nil, true},
		{"an attempt after a later one", []protocol.Event{ev(2, protocol.StateTriggered), ev(1, protocol.StateRetryWaiting)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := reconcile(faultData{events: tc.events, stalls: tc.stalls})
			if got := rep.count(vHistory) > 0; got != tc.bad {
				t.Errorf("history violations %d, want any: %v (%v)", rep.count(vHistory), tc.bad, rep.violations[vHistory])
			}
		})
	}
}
