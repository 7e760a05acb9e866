package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestRegistrationAndLiveness: registration and heartbeats are answered
// with controller time and the shard count, recorded in ax_agents, and an
// agent goes offline when its heartbeats stop (injected clock).
func TestRegistrationAndLiveness(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	cfg.Shards = 8
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", map[string]string{"site": "p3"})
	rr := a.register()
	if rr.Shards != 8 || !rr.ControllerTime.Equal(start) || rr.HeartbeatInterval.D() != DefaultHeartbeatInterval {
		t.Fatalf("register reply %+v", rr)
	}
	hr := a.heartbeat()
	if hr.Error != "" || !hr.ControllerTime.Equal(start) {
		t.Fatalf("heartbeat reply %+v", hr)
	}
	agents, err := c.ListAgents(ctx)
	if err != nil || len(agents) != 1 {
		t.Fatalf("ListAgents = %v, %v", agents, err)
	}
	got := agents[0]
	if !got.Online || got.Labels["site"] != "p3" || got.Arch != "arm64" || got.Version != "test" ||
		!slices.Equal(got.Handlers, []string{"noop"}) || !got.LastSeen.Equal(start) {
		t.Fatalf("agent %+v", got)
	}
	if e, err := c.kv.Agents.Get(ctx, "edge-1"); err != nil || len(e.Value()) == 0 {
		t.Fatalf("ax_agents record: %v", err)
	}
	if v := testutil.MetricValue(t, c.m.agentsOnline); v != 1 {
		t.Fatalf("ax_agents_online = %v", v)
	}
	fake.Advance(cfg.AgentOfflineAfter + time.Second)
	agents, _ = c.ListAgents(ctx)
	if agents[0].Online {
		t.Fatal("agent still online after agent_offline_after without heartbeat")
	}
	eventually(t, 10*time.Second, "ax_agents_online 0", func() bool { return testutil.MetricValue(t, c.m.agentsOnline) == 0 })
	a.heartbeat()
	agents, _ = c.ListAgents(ctx)
	if !agents[0].Online {
		t.Fatal("agent offline after a heartbeat")
	}

	// Refusals: unknown agent heartbeat, subject mismatch, invalid message.
	b := newTestAgent(t, c.NATSURL(), "edge-2", nil)
	if hr := b.heartbeat(); hr.Error == "" {
		t.Fatal("heartbeat of an unregistered agent accepted")
	}
	data, _ := protocol.Encode(protocol.Register{V: 1, Agent: "edge-1", SentAt: time.Now()})
	msg, err := b.nc.Request(protocol.RegisterSubject("edge-2"), data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rr, _ := protocol.DecodeRegisterReply(msg.Data); rr.Error == "" {
		t.Fatal("registration on another agent's subject accepted")
	}
	msg, err = b.nc.Request(protocol.RegisterSubject("edge-2"), []byte(`{"v":2,"agent":"edge-2","bogus":1}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rr, _ := protocol.DecodeRegisterReply(msg.Data); rr.Error == "" {
		t.Fatal("invalid registration accepted")
	}
}

func hasUnassign(jobID string) func(protocol.Command) bool {
	return func(c protocol.Command) bool { return c.Kind == protocol.CmdUnassign && c.Unassign.JobID == jobID }
}

func lastAssign(a *testAgent, jobID string) *protocol.Assign {
	var last *protocol.Assign
	for _, c := range a.commands() {
		if c.Kind == protocol.CmdAssign && c.Assign.Job.ID == jobID {
			last = c.Assign
		}
	}
	return last
}

// TestBroadcastAssignment: a mode-all job goes to every matching agent with
// its shard slot (agent-id order), agents joining and leaving re-slot the
// group, and non-matching agents get nothing.
func TestBroadcastAssignment(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	site := map[string]string{"site": "p3"}
	a1 := newTestAgent(t, c.NATSURL(), "a1", site).start()
	a3 := newTestAgent(t, c.NATSURL(), "a3", site).start()
	other := newTestAgent(t, c.NATSURL(), "zz", map[string]string{"site": "elsewhere"}).start()
	job, err := c.CreateJob(ctx, protocol.Job{Name: "valves", Handler: "noop", Schedule: schedule.Spec{Every: "1m"},
		Target: protocol.Target{Group: "site=p3", Mode: protocol.ModeAll}})
	if err != nil {
		t.Fatal(err)
	}
	slot := func(a *testAgent, idx, total int) {
		t.Helper()
		eventually(t, 10*time.Second, a.id+" slot", func() bool {
			l := lastAssign(a, job.ID)
			return l != nil && l.Shard != nil && l.Shard.Index == idx && l.Shard.Total == total
		})
	}
	slot(a1, 0, 2)
	slot(a3, 1, 2)
	// A later agent joins between them: everybody is re-slotted.
	a2 := newTestAgent(t, c.NATSURL(), "a2", site).start()
	slot(a1, 0, 3)
	slot(a2, 1, 3)
	slot(a3, 2, 3)
	// a2 cannot leave the group by registering with other labels: the
	// controller's labels stand (the reply says which).
	a2.labels = map[string]string{"site": "p4"}
	if rr := a2.register(); rr.Labels["site"] != "p3" {
		t.Fatalf("registration reply labels = %v, want the controller's site=p3", rr.Labels)
	}
	if a, _ := c.agents.Get("a2"); a.Labels["site"] != "p3" {
		t.Fatalf("registration changed the labels: %v", a.Labels)
	}
	// An operator moves it out of the group.
	if _, err := c.LabelAgent(ctx, "a2", protocol.LabelChange{Set: map[string]string{"site": "p4"}}); err != nil {
		t.Fatal(err)
	}
	a2.waitCommand("unassign", hasUnassign(job.ID))
	slot(a1, 0, 2)
	slot(a3, 1, 2)
	if lastAssign(other, job.ID) != nil {
		t.Fatal("non-matching agent got the job")
	}
	// Broadcast trigger: one execution per member.
	x, err := c.TriggerJob(ctx, job.ID)
	if err != nil || x.Shard == nil || x.Shard.Total != 2 {
		t.Fatalf("trigger = %+v, %v", x, err)
	}
	a3.waitCommand("broadcast run", func(c protocol.Command) bool {
		return c.Kind == protocol.CmdRun && c.Run.Job.ID == job.ID && c.Run.ExecID == protocol.BroadcastExecID(job.ID, x.ScheduledAt, 1)
	})
}

// TestAssignmentLifecycle: a pinned job created before its agent exists
// reaches it on registration; updates, pauses and deletes reach it; a
// cursor behind the stream's first sequence gets the assignments again;
// mode any goes to exactly one member.
func TestAssignmentLifecycle(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	job, err := c.CreateJob(ctx, everyJob("late", "1m"))
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, c.NATSURL(), "late", nil).start()
	a.waitCommand("assign", isAssign(job.ID, 1))
	if _, err := c.PauseJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	p := a.waitCommand("paused assign", isAssign(job.ID, 2))
	if !p.Assign.Job.Paused {
		t.Fatal("paused job assigned unpaused")
	}
	// Commands expire from AX_CMD (here: purge); an agent behind gets its assignments again.
	str, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if err := str.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.cmds, a.cursor = nil, 0
	a.mu.Unlock()
	a.cc.Stop()
	a.follow()
	a.register()
	a.waitCommand("re-sent assign", isAssign(job.ID, 2))
	// An agent with an up-to-date cursor gets nothing again.
	n := len(a.commands())
	a.register()
	other, err := c.CreateJob(ctx, everyJob("late", "2m")) // a marker command after the re-registration
	if err != nil {
		t.Fatal(err)
	}
	a.waitCommand("marker", isAssign(other.ID, 1))
	if got := len(a.commands()); got != n+1 {
		t.Fatalf("up-to-date re-registration re-sent assignments: %d commands, want %d", got, n+1)
	}
	if err := c.DeleteJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	a.waitCommand("unassign", hasUnassign(job.ID))

	// Retarget: moving a pinned job to another agent unassigns the first.
	b := newTestAgent(t, c.NATSURL(), "moved", nil).start()
	moved := other
	moved.Target.Agent = "moved"
	moved.Generation = 0
	if _, err := c.UpdateJob(ctx, other.ID, moved); err != nil {
		t.Fatal(err)
	}
	a.waitCommand("unassign after retarget", hasUnassign(other.ID))
	b.waitCommand("assign after retarget", isAssign(other.ID, 2))

	// Mode any: exactly one of the group.
	g1 := newTestAgent(t, c.NATSURL(), "g1", map[string]string{"role": "cache"}).start()
	g2 := newTestAgent(t, c.NATSURL(), "g2", map[string]string{"role": "cache"}).start()
	anyJob, err := c.CreateJob(ctx, protocol.Job{Name: "cache", Handler: "noop", Schedule: schedule.Spec{Cron: "*/5 * * * *"},
		Target: protocol.Target{Group: "role=cache"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mode any assigned", func() bool {
		return lastAssign(g1, anyJob.ID) != nil || lastAssign(g2, anyJob.ID) != nil
	})
	marker, _ := c.CreateJob(ctx, everyJob("g1", "1h"))
	g1.waitCommand("marker", isAssign(marker.ID, 1))
	marker2, _ := c.CreateJob(ctx, everyJob("g2", "1h"))
	g2.waitCommand("marker", isAssign(marker2.ID, 1))
	if (lastAssign(g1, anyJob.ID) != nil) == (lastAssign(g2, anyJob.ID) != nil) {
		t.Fatal("mode any job assigned to both or neither agent")
	}
	holder := "g1"
	if lastAssign(g2, anyJob.ID) != nil {
		holder = "g2"
	}
	if want := fleet.Rendezvous(anyJob.ID, []protocol.AgentInfo{{Agent: "g1"}, {Agent: "g2"}}); holder != want {
		t.Fatalf("holder %s, rendezvous says %s", holder, want)
	}
}

// TestOneShotWaitsForGroupAgent: a mode-any one-shot job with no agent in
// its group stays PENDING until one registers, then runs there.
func TestOneShotWaitsForGroupAgent(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	job, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Group: "site=new"}})
	if err != nil {
		t.Fatal(err)
	}
	id := protocol.ExecID(job.ID, job.CreatedAt)
	e := waitExec(t, c, id, "PENDING without agent", inState(protocol.StatePending))
	if e.Agent != "" || e.Reason != "no_agent" {
		t.Fatalf("execution %+v", e)
	}
	a := newTestAgent(t, c.NATSURL(), "newcomer", map[string]string{"site": "new"}).start()
	a.waitCommand("run", isRun(id, 1))
	waitExec(t, c, id, "placed", func(e protocol.Execution) bool { return e.Agent == "newcomer" })
}
