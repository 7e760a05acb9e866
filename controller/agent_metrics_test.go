package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// gauge reads the gauge name{agent} (agent "" for an unlabelled gauge)
// from the controller's registry, as a scrape would; ok is false when the
// series does not exist.
func gauge(t testing.TB, c *Controller, name, agent string) (v float64, ok bool) {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "agent" {
					got = l.GetValue()
				}
			}
			if got == agent {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// heartbeatStats sends a heartbeat carrying st and checks it is accepted.
func (a *testAgent) heartbeatStats(st protocol.Stats) {
	a.t.Helper()
	if hr := a.sendHeartbeat(protocol.Heartbeat{Stats: st}); hr.Error != "" {
		a.t.Fatalf("heartbeat reply %+v", hr)
	}
}

type wantGauge struct {
	name, agent string
	v           float64
}

func checkGauges(t *testing.T, c *Controller, want []wantGauge) {
	t.Helper()
	for _, w := range want {
		if v, ok := gauge(t, c, w.name, w.agent); !ok || v != w.v {
			t.Errorf("%s{agent=%q} = %v (exists %t), want %v", w.name, w.agent, v, ok, w.v)
		}
	}
}

// TestAgentStatsGauges: the stats of each heartbeat set the agent's
// ax_agent_* gauges; ax_agents_known counts registered agents online or
// not; a restarted controller exports the stats stored with the last
// heartbeat.
func TestAgentStatsGauges(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	c := startController(t, cfg)
	if v, ok := gauge(t, c, metricAgentsKnown, ""); !ok || v != 0 {
		t.Fatalf("ax_agents_known before any agent = %v (exists %t)", v, ok)
	}
	a1 := newTestAgent(t, c.NATSURL(), "edge-1", nil)
	a2 := newTestAgent(t, c.NATSURL(), "edge-2", nil)
	a1.register()
	a2.register()
	if _, ok := gauge(t, c, metricAgentOutbox, "edge-1"); ok {
		t.Fatal("ax_agent_outbox_depth exported before the agent's first heartbeat")
	}
	a1.heartbeatStats(protocol.Stats{OutboxDepth: 1500, QueueDepth: 7, Running: 3, Pending: 2})
	a2.heartbeatStats(protocol.Stats{OutboxDepth: 0, QueueDepth: 1, Running: 4})
	checkGauges(t, c, []wantGauge{
		{metricAgentOutbox, "edge-1", 1500}, {metricAgentQueue, "edge-1", 7}, {metricAgentRunning, "edge-1", 3},
		{metricAgentOutbox, "edge-2", 0}, {metricAgentQueue, "edge-2", 1}, {metricAgentRunning, "edge-2", 4},
		{metricAgentsKnown, "", 2}, {metricAgentsOnline, "", 2},
	})
	// The first heartbeats' stats reach ax_agents through the liveness
	// writers, after the reply: wait for them before the next heartbeat,
	// which is not written (it changes nothing else).
	eventually(t, 10*time.Second, "first heartbeats stored", func() bool {
		ctx := tctx(t)
		return storedAgent(t, ctx, c, "edge-1").Stats.OutboxDepth == 1500 && storedAgent(t, ctx, c, "edge-2").Stats.QueueDepth == 1
	})
	// The next heartbeat replaces the values (the outbox drained).
	a1.heartbeatStats(protocol.Stats{OutboxDepth: 12, QueueDepth: 0, Running: 1})
	checkGauges(t, c, []wantGauge{
		{metricAgentOutbox, "edge-1", 12}, {metricAgentQueue, "edge-1", 0}, {metricAgentRunning, "edge-1", 1},
	})

	// Restart on the same store: the stats of the last heartbeats stored
	// come back (the first after registration; later ones that change
	// nothing else are not written, controller/fleet/agentstore.go).
	a1.close()
	a2.close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = startController(t, testConfig(t, dir))
	checkGauges(t, c, []wantGauge{
		{metricAgentOutbox, "edge-1", 1500}, {metricAgentRunning, "edge-1", 3}, {metricAgentQueue, "edge-2", 1},
		{metricAgentsKnown, "", 2},
	})
}

// newEnrolledAgent enrolls id on c (nats.auth: nkeys) and connects a test
// agent with the issued seed only.
func newEnrolledAgent(t *testing.T, c *Controller, id string, labels map[string]string) *testAgent {
	t.Helper()
	en, err := c.EnrollAgent(tctx(t), id, auth.EnrollRequest{Labels: labels})
	if err != nil {
		t.Fatalf("enroll %s: %v", id, err)
	}
	kp, err := nkeys.FromSeed([]byte(en.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	opt := nats.Nkey(pub, kp.Sign)
	nc, err := nats.Connect(c.NATSURL(), opt, nats.CustomInboxPrefix(protocol.InboxPrefix(id)), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("agent %s connect: %v", id, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	a := &testAgent{t: t, id: id, labels: labels, nc: nc, js: js, shards: protocol.DefaultShards}
	t.Cleanup(a.close)
	return a
}

// TestRevokedAgentForgotten: revoking an agent deletes its ax_agent_*
// gauges, drops it from ax_agents_known, marks its record revoked and
// moves its group jobs; enrolling it again lets it register and report.
func TestRevokedAgentForgotten(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS.Auth = auth.ModeNKeys
	c := startController(t, cfg)
	ctx := tctx(t)
	site := map[string]string{"site": "lab"}
	a1 := newEnrolledAgent(t, c, "edge-1", site).start()
	a2 := newEnrolledAgent(t, c, "edge-2", site).start()
	a1.heartbeatStats(protocol.Stats{OutboxDepth: 5000, QueueDepth: 2, Running: 1})
	a2.heartbeatStats(protocol.Stats{OutboxDepth: 3})
	checkGauges(t, c, []wantGauge{{metricAgentOutbox, "edge-1", 5000}, {metricAgentsKnown, "", 2}})

	job, err := c.CreateJob(ctx, protocol.Job{Name: "probe", Handler: "noop", Schedule: schedule.Spec{Every: "1m"},
		Target: protocol.Target{Group: "site=lab", Mode: protocol.ModeAll}})
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
	slot(a2, 1, 2)

	if _, err := c.RevokeAgent(ctx, "edge-1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{metricAgentOutbox, metricAgentQueue, metricAgentRunning} {
		if v, ok := gauge(t, c, name, "edge-1"); ok {
			t.Errorf("%s{agent=edge-1} = %v after revocation, want no series", name, v)
		}
	}
	checkGauges(t, c, []wantGauge{{metricAgentOutbox, "edge-2", 3}, {metricAgentsKnown, "", 1}, {metricAgentsOnline, "", 1}})
	slot(a2, 0, 1) // edge-2 alone in the group now
	e, err := c.kv.Agents.Get(ctx, "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	var rec protocol.AgentInfo
	if err := json.Unmarshal(e.Value(), &rec); err != nil || !rec.Revoked {
		t.Fatalf("ax_agents record of edge-1 after revocation: revoked %t, %v", rec.Revoked, err)
	}

	// Enrolled again: it registers, reports stats, counts again.
	b1 := newEnrolledAgent(t, c, "edge-1", site).start()
	b1.heartbeatStats(protocol.Stats{OutboxDepth: 9})
	checkGauges(t, c, []wantGauge{{metricAgentOutbox, "edge-1", 9}, {metricAgentsKnown, "", 2}})
	slot(a2, 1, 2)
}
