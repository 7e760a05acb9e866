package scheduler

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// heldSink records the Hold mark of every outbox row committed, by
// Msg-Id.
type heldSink struct {
	mu   sync.Mutex
	hold map[string]bool
}

func newHeldSink(t *testing.T, o *offline) *heldSink {
	t.Helper()
	h := &heldSink{hold: map[string]bool{}}
	_, err := o.st.SetOutboxSink(context.Background(), func(ms []store.OutboxMsg) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, m := range ms {
			h.hold[m.MsgID] = m.Hold
		}
	})
	must(t, err)
	return h
}

// of returns the Hold mark of the report of step kind of attempt 1 of
// execID; ok is false when no such row was committed within 10 s. The
// writer hands a batch's rows to the sink after the batch's callbacks, so
// a row may reach it a moment after offline.sync returned.
func (h *heldSink) of(execID string, kind protocol.ReportKind) (hold, ok bool) {
	suffix := "/" + protocol.ReportMsgID(execID, 1, kind)
	find := func() (bool, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for id, held := range h.hold {
			if strings.HasSuffix(id, suffix) {
				return held, true
			}
		}
		return false, false
	}
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if hold, ok = find(); ok || time.Now().After(deadline) {
			return hold, ok
		}
		<-poll.C
	}
}

// TestHoldMarksPeriodicFires: the triggered report of a fire of a
// periodic job is marked for the outbox's hold (its later steps then go
// out with it as one report), and so is that of a run the controller
// sent; the triggered report of a fire under a group lease (epoch > 0) is
// not, because the lease and its moves follow the reports.
func TestHoldMarksPeriodicFires(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-h"), start)
	sink := newHeldSink(t, o)

	pinned := protocoltest.NewJob("edge-h", "noop", schedule.Spec{Every: "1s"}, nil)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: pinned}})
	at := o.fireNext(pinned.ID)
	if hold, ok := sink.of(protocol.ExecID(pinned.ID, at), protocol.ReportTriggered); !ok || !hold {
		t.Errorf("periodic fire at %s: triggered report committed %v, held %v; want a held report", at, ok, hold)
	}

	once := protocoltest.NewJob("edge-h", "noop", schedule.Spec{Asap: true}, nil)
	runAt := o.clk.Now()
	o.apply(protocoltest.RunCmd(once, 1, runAt))
	o.sync()
	if hold, ok := sink.of(protocol.ExecID(once.ID, runAt), protocol.ReportTriggered); !ok || !hold {
		t.Errorf("run the controller sent: triggered report committed %v, held %v; want a held report", ok, hold)
	}

	group := groupJob("edge-h", "1s", protocol.ModeAny)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: group, Epoch: 3}})
	o.apply(protocol.Command{Kind: protocol.CmdLeaseGrant, Lease: &protocol.Lease{JobID: group.ID, Epoch: 4, TTL: protocol.Duration(time.Hour)}})
	o.s.leaseGranted(group.ID, 4, o.clk.Now(), time.Hour)
	at = o.fireNext(group.ID)
	if hold, ok := sink.of(protocol.ExecID(group.ID, at), protocol.ReportTriggered); !ok || hold {
		t.Errorf("fire under a group lease at %s: triggered report committed %v, held %v; want a report not held", at, ok, hold)
	}
}
