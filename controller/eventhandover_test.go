package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestHeldPendingEventBeforeNextOwners: replica ctl-a creates one-shots of
// a group job (their records stored, their PENDING events held: here for
// long, a hold tick of 10 s), then ctl-b starts and takes half the shards,
// and the agent reports the executions on ctl-b's shards finished, which
// ctl-b applies. Each one's PENDING event must be stored before ctl-b's
// SUCCESS event: ctl-a publishes a shard's held events as it hands the
// shard over. Held to the end of the hold instead, they came after.
func TestHeldPendingEventBeforeNextOwners(t *testing.T) {
	srv := natstest.Start(t)
	cfgA := replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second)
	cfgA.heldTick = 10 * time.Second
	a := startController(t, cfgA)
	ev := natstest.WatchStoredEvents(t, srv.URL())
	ag := newTestAgent(t, srv.URL(), "edge-1", map[string]string{"site": "x"}).start()
	ag.register()
	ctx := tctx(t)
	type made struct {
		job protocol.Job
		run *protocol.Run
	}
	var ms []made
	for range 16 {
		j, err := a.CreateJob(ctx, protocol.Job{Name: "g", Handler: "noop", Schedule: schedule.Spec{Asap: true},
			Target: protocol.Target{Group: "site=x"}})
		if err != nil {
			t.Fatal(err)
		}
		run := ag.waitCommand("the run of "+j.ID, func(cmd protocol.Command) bool {
			return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == j.ID
		}).Run
		ms = append(ms, made{j, run})
	}
	if n := a.evHold.n.Load(); n != int64(len(ms)) {
		t.Fatalf("ctl-a holds %d PENDING events, want %d (one a create)", n, len(ms))
	}

	b := startController(t, replicaConfig(t, srv.URL(), "ctl-b", 2*time.Second))
	eventually(t, 20*time.Second, "8 shards each", func() bool {
		return len(a.own.OwnedShards()) == 8 && len(b.own.OwnedShards()) == 8
	})
	var moved []made
	for _, m := range ms {
		if b.own.OwnsJob(m.job.ID) {
			moved = append(moved, m)
			ag.publish(coalesced(finished(ag.rep(m.job.ID, m.run.ExecID, 1, protocol.ReportFinished, m.run.RunAt), retry.OutcomeSuccess, ok, time.Millisecond)), "")
		}
	}
	if len(moved) == 0 {
		t.Fatal("no job of the 16 on a shard ctl-b took")
	}
	for _, m := range moved {
		var path []protocol.State
		testutil.EventuallyFunc(t, 30*time.Second, func() string {
			return fmt.Sprintf("the events of %s stored, PENDING and SUCCESS; have %v", m.run.ExecID, path)
		}, func() bool {
			path = path[:0]
			for _, e := range ev.All() {
				if e.ExecID == m.run.ExecID {
					path = append(path, e.To)
				}
			}
			return slices.Contains(path, protocol.StatePending) && slices.Contains(path, protocol.StateSuccess)
		})
		if want := []protocol.State{protocol.StatePending, protocol.StateSuccess}; !slices.Equal(path, want) {
			t.Errorf("events of %s (moved to ctl-b) stored as %v, want %v", m.run.ExecID, path, want)
		}
	}
	// What stayed on ctl-a is still held until its hold ends.
	if n := a.evHold.n.Load(); n != int64(len(ms)-len(moved)) {
		t.Errorf("ctl-a holds %d PENDING events after the hand-over, want %d (those of its own shards)", n, len(ms)-len(moved))
	}
}
