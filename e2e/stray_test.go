package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestStrayJobUnassigned: an agent that holds assignments whose unassign
// it never got (here published straight to its command subject, as a
// controller killed between a job's write and its commands would leave
// them) fires them; the controller refuses those fires and sends the
// agent an unassign, and the agent stops firing: a job that does not
// exist, and a job pinned to another agent. A job the agent is assigned
// goes on running, and no unassign goes out for it.
func TestStrayJobUnassigned(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	var mu sync.Mutex
	runs := map[string]int{}
	work := func(_ context.Context, task agent.Task) agent.Result {
		mu.Lock()
		runs[task.JobID]++
		mu.Unlock()
		return agent.Result{}
	}
	ra := startAgent(t, agentConfig("edge-sy", c.NATSURL(), t.TempDir(), nil), agent.WithHandler("work", work))
	waitAgentOnline(t, c, "edge-sy")
	ranOf := func(id string) int { mu.Lock(); defer mu.Unlock(); return runs[id] }

	mine := createJob(t, c, protocol.Job{Name: "mine", Handler: "work", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Agent: "edge-sy"}})
	elsewhere := createJob(t, c, protocol.Job{Name: "elsewhere", Handler: "work", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Agent: "edge-other"}})
	gone := protocoltest.NewJob("edge-sy", "work", schedule.Spec{Every: "200ms"}, nil)
	gone.Generation = 1
	// A broadcast job of a group edge-sy is not in: its fires are
	// refused, but the agent registry may lag (a member that just joined),
	// so it is not unassigned.
	group := createJob(t, c, protocol.Job{Name: "group", Handler: "work", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Group: "site=elsewhere", Mode: protocol.ModeAll}})

	// The stray assignments: elsewhere's spec (its generation) and a job
	// ax_jobs never held, both handed to edge-sy.
	strayed := elsewhere
	strayed.Target = protocol.Target{Agent: "edge-sy"}
	publishAssign(t, c, "edge-sy", strayed, nil)
	publishAssign(t, c, "edge-sy", gone, nil)
	publishAssign(t, c, "edge-sy", group, &protocol.ShardSlot{Index: 0, Total: 1})

	for _, id := range []string{strayed.ID, gone.ID} {
		testutil.EventuallyFunc(t, 20*time.Second, func() string { return "the stray job " + id + " fired and unassigned on the agent" }, func() bool {
			_, err := ra.Agent.Store().Job(context.Background(), id)
			return ranOf(id) > 0 && errors.Is(err, store.ErrNotFound)
		})
	}
	// The lane counts a rejection after its plan, in which the unassign
	// went out: the agent may have dropped the job before the count.
	for _, reason := range []string{"unknown_job", "not_assigned"} {
		testutil.EventuallyFunc(t, 20*time.Second, func() string { return reason + " rejections counted" }, func() bool {
			return counter(t, c, "ax_reports_rejected_total", "reason", reason) >= 1
		})
	}
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "fires of the broadcast job refused" }, func() bool {
		return ranOf(group.ID) >= 3 && counter(t, c, "ax_reports_rejected_total", "reason", "not_assigned") >= 3
	})
	if _, err := ra.Agent.Store().Job(context.Background(), group.ID); err != nil {
		t.Errorf("the broadcast job left the agent (%v); a group membership is not proof of a stray", err)
	}
	if n := strayUnassigns(t, c); n != 2 {
		t.Errorf("ax_stray_unassigns_total %v, want 2 (one per stray job within the minute)", n)
	}
	// The agent's own job keeps firing and succeeding.
	before := ranOf(mine.ID)
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "more runs of the assigned job" }, func() bool { return ranOf(mine.ID) >= before+3 })
	if _, err := ra.Agent.Store().Job(context.Background(), mine.ID); err != nil {
		t.Fatalf("the assigned job left the agent: %v", err)
	}
	waitExecs(t, c, mine.ID, 3, "in SUCCESS", inState(protocol.StateSuccess))
}

// publishAssign publishes an assign of j to agent's command subject
// directly, bypassing the controller.
func publishAssign(tb testing.TB, c *controller.Controller, agentID string, j protocol.Job, shard *protocol.ShardSlot) {
	tb.Helper()
	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := protocol.Encode(protocol.Command{V: protocol.Version, Kind: protocol.CmdAssign, Agent: agentID,
		IssuedAt: time.Now().UTC(), Assign: &protocol.Assign{Job: j, Shard: shard}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := js.Publish(testutil.Context(tb, 10*time.Second), protocol.CommandSubject(agentID), data); err != nil {
		tb.Fatal(err)
	}
}

// strayUnassigns reads ax_stray_unassigns_total.
func strayUnassigns(tb testing.TB, c *controller.Controller) float64 {
	tb.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ax_stray_unassigns_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
