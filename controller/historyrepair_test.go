package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
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

// TestHistoryRepairAmongManyLive: 20 PENDING executions written before a
// killed process's mark and two after it, of which one was changed
// behind the controller's back (its event lost). The restart's reload
// checks the two (it looks their stamps up by id, not by reading every
// live row), restores the one event the index lacks and not the other's,
// and the list shows the change.
func TestHistoryRepairAmongManyLive(t *testing.T) {
	cfg, c, a := onExternalServer(t, func(cfg *Config) { cfg.marksMargin = time.Nanosecond })
	ctx := tctx(t)
	a.register()
	later := func() protocol.Job {
		return protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"}, Target: protocol.Target{Agent: "edge-1"}}
	}
	listed := func(c *Controller, jobID string) protocol.Execution {
		t.Helper()
		var e protocol.Execution
		eventually(t, 10*time.Second, "job "+jobID+"'s execution listed", func() bool {
			list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: jobID})
			if err == nil && len(list) == 1 {
				e = list[0]
				return true
			}
			return false
		})
		return e
	}
	const old = 20
	var last string
	for range old {
		j, err := c.CreateJob(ctx, later())
		if err != nil {
			t.Fatal(err)
		}
		last = j.ID
	}
	listed(c, last)
	x, err := c.CreateJob(ctx, later())
	if err != nil {
		t.Fatal(err)
	}
	xe := listed(c, x.ID)
	leaveDeadMark(t, cfg, xe.UpdatedAt.Add(-time.Nanosecond))
	y, err := c.CreateJob(ctx, later())
	if err != nil {
		t.Fatal(err)
	}
	ye := listed(c, y.ID)
	v, err := c.ex.readExec(ctx, ye.ExecID)
	if err != nil || v.Rec == nil {
		t.Fatalf("read %s: %+v %v", ye.ExecID, v.Rec, err)
	}
	rec := *v.Rec
	rec.State, rec.Reason, rec.UpdatedAt = protocol.StateCancelled, "cancelled", rec.UpdatedAt.Add(time.Second)
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.kv.Execs.Update(ctx, ye.ExecID, data, v.Rev); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, r := restartForReload(t, cfg)
	if r["checked"] != float64(2) || r["unchecked"] != float64(old) || r["events_restored"] != float64(1) {
		t.Fatalf("reload %v: want 2 checked, %d unchecked, 1 event restored", r, old)
	}
	eventually(t, 10*time.Second, "the list shows the stored CANCELLED after the restart", func() bool {
		list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: y.ID})
		return err == nil && len(list) == 1 && list[0].State == protocol.StateCancelled
	})
	if e := listed(c, x.ID); e.State != protocol.StatePending {
		t.Fatalf("job %s's execution listed %s, want PENDING", x.ID, e.State)
	}
}
