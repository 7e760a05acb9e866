package controller

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestHistoryAppliesOwnEventsFromMemo: the history follower applies the
// events this replica published from their snapshots, without decoding
// them (every event of the executions is a memo hit and the memo is empty
// once the index shows them ended), and the index shows what the events
// said.
func TestHistoryAppliesOwnEventsFromMemo(t *testing.T) {
	c := newTestController(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)
	var execs []string
	for range 3 {
		j, err := c.CreateJob(ctx, asapJob("edge-1"))
		if err != nil {
			t.Fatal(err)
		}
		id := protocol.ExecID(j.ID, j.CreatedAt)
		a.waitCommand("run of "+id, isRun(id, 1))
		a.runAttempt(j.ID, id, 1, j.CreatedAt, retry.OutcomeSuccess, retry.Result{Code: 200, Message: "ok"})
		execs = append(execs, id)
	}
	for _, id := range execs {
		e := waitHist(t, c, id, protocol.StateSuccess)
		if e.Result == nil || e.Result.Code != 200 || e.Agent != "edge-1" || e.Attempt != 1 {
			t.Errorf("history of %s: %+v, want SUCCESS on edge-1 with code 200", id, e)
		}
	}
	if h := c.evMemo.hits.Load(); h < uint64(2*len(execs)) {
		t.Errorf("%d events applied from the memo, want at least %d (PENDING and SUCCESS of each execution)", h, 2*len(execs))
	}
	c.evMemo.mu.Lock()
	left := len(c.evMemo.m)
	c.evMemo.mu.Unlock()
	if left != 0 {
		t.Errorf("%d events left in the memo after the follower read them", left)
	}

}

// TestEventMemoTakesOnlyWhatWasPublished: the memo gives a snapshot back
// only for the message it was published as: a message with the same
// Msg-Id and other data (another process's event, stored first, the
// stream dropping this replica's as a duplicate) is not taken from it.
func TestEventMemoTakesOnlyWhatWasPublished(t *testing.T) {
	var em eventMemo
	mine := &protocol.Execution{ExecID: "x", State: protocol.StateSuccess, Reason: "mine"}
	em.put("evt/x/1/SUCCESS", []byte(`{"mine":true}`), mine)
	if _, ok := em.take("evt/x/1/SUCCESS", []byte(`{"theirs":true}`)); ok {
		t.Error("a message with other data was taken from the memo")
	}
	if _, ok := em.take("evt/x/1/SUCCESS", []byte(`{"mine":true}`)); ok {
		t.Error("an entry was taken twice (the first look forgets it)")
	}
	em.put("evt/x/1/SUCCESS", []byte(`{"mine":true}`), mine)
	if e, ok := em.take("evt/x/1/SUCCESS", []byte(`{"mine":true}`)); !ok || e != mine {
		t.Errorf("the message as published: %v, %v; want the snapshot put", e, ok)
	}
	if _, ok := em.take("", nil); ok {
		t.Error("a message without a Msg-Id was taken")
	}
}

// waitHist waits until the history index holds execution id in state s.
func waitHist(t *testing.T, c *Controller, id string, s protocol.State) protocol.Execution {
	t.Helper()
	var e protocol.Execution
	eventually(t, 10*time.Second, "history of "+id+" in "+string(s), func() bool {
		c.hist.catchUp(tctx(t))
		got, ok, err := c.hist.idx.Get(tctx(t), id)
		e = got
		return err == nil && ok && got.State == s
	})
	return e
}
