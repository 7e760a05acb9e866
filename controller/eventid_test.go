package controller

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestPendingEventHasNoMsgID: the PENDING event of a create carries its id
// in protocol.EventIDHeader and no Nats-Msg-Id (the stream keeps no
// de-duplication entry for it), every later event its Msg-Id; the history
// follower applies both from the memo (TestHistoryAppliesOwnEventsFromMemo
// counts the hits).
func TestPendingEventHasNoMsgID(t *testing.T) {
	c := newTestController(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)
	delayed := protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "30m"}, Target: protocol.Target{Agent: "edge-1"}}
	late, err := c.CreateJob(ctx, delayed)
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	nowID := protocol.ExecID(now.ID, now.CreatedAt)
	var lateID string
	eventually(t, 10*time.Second, "the execution of the delayed job", func() bool {
		list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: late.ID})
		if err != nil || len(list) != 1 {
			return false
		}
		lateID = list[0].ExecID
		return true
	})
	a.waitCommand("run of "+nowID, isRun(nowID, 1))
	a.runAttempt(now.ID, nowID, 1, now.CreatedAt, retry.OutcomeSuccess, retry.Result{Code: 200, Message: "ok"})
	waitHist(t, c, nowID, protocol.StateSuccess)
	waitHist(t, c, lateID, protocol.StatePending)

	cons, err := c.js.OrderedConsumer(ctx, protocol.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	type ids struct{ msgID, eventID string }
	got := map[string]ids{} // exec/state → headers
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			break // read them all
		}
		if protocol.IsJobRetiredSubject(m.Subject()) {
			continue
		}
		ev, err := protocol.DecodeEvent(m.Data())
		if err != nil {
			t.Fatalf("event at %s: %v", m.Subject(), err)
		}
		got[ev.ExecID+"/"+string(ev.To)] = ids{m.Headers().Get(jetstream.MsgIDHeader), m.Headers().Get(protocol.EventIDHeader)}
	}
	pend, ok := got[lateID+"/PENDING"]
	if !ok {
		t.Fatalf("no PENDING event of %s among %v", lateID, got)
	}
	if want := protocol.EventMsgID(lateID, 1, protocol.StatePending); pend.msgID != "" || pend.eventID != want {
		t.Errorf("PENDING event headers: Nats-Msg-Id %q, %s %q; want none and %q", pend.msgID, protocol.EventIDHeader, pend.eventID, want)
	}
	done, ok := got[nowID+"/SUCCESS"]
	if !ok {
		t.Fatalf("no SUCCESS event of %s among %v", nowID, got)
	}
	if want := protocol.EventMsgID(nowID, 1, protocol.StateSuccess); done.msgID != want || done.eventID != "" {
		t.Errorf("SUCCESS event headers: Nats-Msg-Id %q, %s %q; want %q and none", done.msgID, protocol.EventIDHeader, done.eventID, want)
	}
}
