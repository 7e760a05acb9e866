package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestHistoryRepairedAtRestart: a record written without its event (the
// controller died between the two: here the record is written behind the
// controller's back) is listed at its old state until a restart; the
// restart's reload finds the record ahead of the history index and
// publishes its event, so the list shows the record as stored.
func TestHistoryRepairedAtRestart(t *testing.T) {
	// later: the lost transition's record is newer than the index's row;
	// same: as newer, but with the same updated_at (the steps of one
	// coalesced report share theirs), so only the state tells them apart.
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{{"later", time.Second}, {"same updated_at", 0}} {
		t.Run(tc.name, func(t *testing.T) { testHistoryRepaired(t, tc.skew) })
	}
}

func testHistoryRepaired(t *testing.T, skew time.Duration) {
	cfg, c, a := onExternalServer(t, nil)
	ctx := tctx(t)
	a.register()
	j, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	var execID string
	eventually(t, 10*time.Second, "the one-shot's PENDING execution listed", func() bool {
		list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: j.ID})
		if err == nil && len(list) == 1 && list[0].State == protocol.StatePending {
			execID = list[0].ExecID
			return true
		}
		return false
	})
	v, err := c.ex.readExec(ctx, execID)
	if err != nil || v.Rec == nil {
		t.Fatalf("read %s: %+v %v", execID, v.Rec, err)
	}
	rec := *v.Rec
	// The process that wrote the record died with its op open: the
	// mark it left is older than the record. (A process that stops
	// cleanly removes its mark, and its records count as written with
	// their effects however long ago they were written.)
	leaveDeadMark(t, cfg, rec.UpdatedAt.Add(-time.Second))
	rec.State, rec.Reason, rec.UpdatedAt = protocol.StateCancelled, "cancelled", rec.UpdatedAt.Add(skew)
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.kv.Execs.Update(ctx, execID, data, v.Rev); err != nil {
		t.Fatal(err)
	}
	state := func(c *Controller) protocol.State {
		list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: j.ID})
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		return list[0].State
	}
	if s := state(c); s != protocol.StatePending {
		t.Fatalf("before the restart the list shows %s; the test needs the lost event's old state", s)
	}
	cfg.Registry = nil
	_ = c.Close()
	c = startController(t, cfg)
	eventually(t, 10*time.Second, "the list shows the stored CANCELLED after the restart", func() bool {
		return state(c) == protocol.StateCancelled
	})
}
