package controller

import (
	"context"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// jobChanges is how many job changes c sent by route r.
func jobChanges(c *Controller, r driver.Route) int {
	return int(promtest.ToFloat64(c.m.jobChanges.WithLabelValues(string(r))))
}

// waitSplit waits until replicas a (ctl-a) and b (ctl-b) work 8 shards
// each and a's view of the leases says so: a asks the owner its view names.
func waitSplit(tb testing.TB, a, b *Controller) {
	tb.Helper()
	eventually(tb, 10*time.Second, "8 shards each", func() bool {
		n := 0
		for _, o := range a.ShardOwners() {
			if o == "ctl-b" {
				n++
			}
		}
		return n == 8 && len(a.own.OwnedShards()) == 8 && len(b.own.OwnedShards()) == 8
	})
}

// createOnShardOf creates spec through replica a until the job's shard is
// one of replica b's (about every other id with the shards split); the
// others stay a's own.
func createOnShardOf(t *testing.T, ctx context.Context, a, b *Controller, spec protocol.Job) protocol.Job {
	t.Helper()
	for range 64 {
		j, err := a.CreateJob(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if b.own.OwnsJob(j.ID) {
			return j
		}
	}
	t.Fatalf("no job of 64 landed in a shard of %s", b.cfg.Node)
	return protocol.Job{}
}

// TestJobChangesSentByTheShardOwner: two replicas on one server split the
// shards. Every change of a job made through the replica that does not
// work the job's shard (ctl-a) has its commands sent by the one that does
// (ctl-b): a periodic job's assign, the assigns of its pause and resume, its
// delete's unassign, and a one-shot job's PENDING execution with its run. ctl-a
// counts each change forwarded, ctl-b each served, and neither falls back.
func TestJobChangesSentByTheShardOwner(t *testing.T) {
	srv := natstest.Start(t)
	a := startController(t, replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second))
	b := startController(t, replicaConfig(t, srv.URL(), "ctl-b", 2*time.Second))
	waitSplit(t, a, b)
	ag := newTestAgent(t, srv.URL(), "edge-1", nil).start()
	ctx := tctx(t)

	createOnB := func(spec protocol.Job) protocol.Job { return createOnShardOf(t, ctx, a, b, spec) }
	// changed checks that one more change went ctl-a → ctl-b.
	fwd, served := jobChanges(a, driver.RouteForwarded), jobChanges(b, driver.RouteServed)
	changed := func(what string) {
		t.Helper()
		fwd++
		served++
		if f, s := jobChanges(a, driver.RouteForwarded), jobChanges(b, driver.RouteServed); f != fwd || s != served {
			t.Fatalf("%s: ctl-a forwarded %d, ctl-b served %d; want %d and %d", what, f, s, fwd, served)
		}
		if n := jobChanges(a, driver.RouteFallback) + jobChanges(b, driver.RouteFallback); n != 0 {
			t.Fatalf("%s: %d changes fell back", what, n)
		}
		if n := jobChanges(b, driver.RouteForwarded); n != 0 {
			t.Fatalf("%s: ctl-b forwarded %d changes, made none", what, n)
		}
	}

	j := createOnB(everyJob("edge-1", "1h"))
	changed("create periodic")
	ag.waitCommand("assign from ctl-b", isAssign(j.ID, 1))

	if _, err := a.PauseJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	changed("pause")
	ag.waitCommand("assign of the pause", func(c protocol.Command) bool {
		return isAssign(j.ID, 2)(c) && c.Assign.Job.Paused
	})
	if _, err := a.ResumeJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	changed("resume")
	ag.waitCommand("assign of the resume", isAssign(j.ID, 3))
	if err := a.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	changed("delete")
	ag.waitCommand("unassign of the delete, one generation past the last", func(c protocol.Command) bool {
		return c.Kind == protocol.CmdUnassign && c.Unassign.JobID == j.ID && c.Unassign.Generation == 4
	})

	o := createOnB(asapJob("edge-1"))
	changed("create one-shot")
	run := ag.waitCommand("run of the one-shot job", func(c protocol.Command) bool {
		return c.Kind == protocol.CmdRun && c.Run.Job.ID == o.ID
	})
	for _, c := range []*Controller{a, b} {
		e, err := c.GetExecution(ctx, run.Run.ExecID)
		if err != nil || e.State != protocol.StatePending || e.Agent != "edge-1" {
			t.Fatalf("execution %s read on %s: %+v, %v; want PENDING on edge-1", run.Run.ExecID, c.cfg.Node, e, err)
		}
	}
}

// BenchmarkJobChangeRoute times a job change (a pause or a resume of a
// periodic job pinned to one agent: the compare-and-set in ax_jobs and
// the assign) made through the replica that works the job's shard
// (local) against one made through the other replica (forwarded: the
// request to the owner and its reply on top).
func BenchmarkJobChangeRoute(b *testing.B) {
	srv := natstest.Start(b)
	ra := startController(b, replicaConfig(b, srv.URL(), "ctl-a", 2*time.Second))
	rb := startController(b, replicaConfig(b, srv.URL(), "ctl-b", 2*time.Second))
	waitSplit(b, ra, rb)
	newTestAgent(b, srv.URL(), "edge-1", nil).start()
	ctx := tctx(b)
	var j protocol.Job
	for {
		var err error
		if j, err = ra.CreateJob(ctx, everyJob("edge-1", "1h")); err != nil {
			b.Fatal(err)
		}
		if rb.own.OwnsJob(j.ID) {
			break
		}
	}
	paused := false
	for _, bc := range []struct {
		name  string
		via   *Controller
		route driver.Route
	}{{"local", rb, driver.RouteLocal}, {"forwarded", ra, driver.RouteForwarded}} {
		b.Run(bc.name, func(b *testing.B) {
			before := jobChanges(bc.via, bc.route)
			for b.Loop() {
				var err error
				if paused {
					_, err = bc.via.ResumeJob(ctx, j.ID)
				} else {
					_, err = bc.via.PauseJob(ctx, j.ID)
				}
				if err != nil {
					b.Fatal(err)
				}
				paused = !paused
			}
			if jobChanges(bc.via, bc.route)-before != b.N {
				b.Fatalf("%d changes by route %s, want %d", jobChanges(bc.via, bc.route)-before, bc.route, b.N)
			}
		})
	}
}

// TestOvertakenJobChangeSendsTheNewest: a change whose commands are sent
// after those of a later change of the same job (two replicas' API calls
// at once, a forwarded request that arrived late) sends them toward the
// newest version the replica knows. A job moved from edge-1 to edge-2,
// whose create is then driven again, sends edge-1 no assign of generation
// 1 — which nothing would take back: the unassign of the move went out
// before it, and the agent keeps no record of jobs taken from it — and
// sends edge-2 the assign of generation 2 again.
func TestOvertakenJobChangeSendsTheNewest(t *testing.T) {
	c := newTestController(t)
	ag1 := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	ag2 := newTestAgent(t, c.NATSURL(), "edge-2", nil).start()
	ctx := tctx(t)
	j, err := c.CreateJob(ctx, everyJob("edge-1", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	_, rev1, ok := c.jobs.Get(j.ID)
	if !ok {
		t.Fatal("created job not in the cache")
	}
	ag1.waitCommand("assign of generation 1", isAssign(j.ID, 1))
	moved := j
	moved.Target.Agent = "edge-2"
	if _, err := c.UpdateJob(ctx, j.ID, moved); err != nil {
		t.Fatal(err)
	}
	ag2.waitCommand("assign of generation 2", isAssign(j.ID, 2))
	// The unassign says the generation the job is taken at: the agent
	// refuses an older assign after it (agent/store: removed).
	ag1.waitCommand("unassign of the move at generation 2", func(cmd protocol.Command) bool {
		return cmd.Kind == protocol.CmdUnassign && cmd.Unassign.JobID == j.ID && cmd.Unassign.Generation == 2
	})
	assigns := func() int {
		n := 0
		for _, cmd := range ag2.commands() {
			if isAssign(j.ID, 2)(cmd) {
				n++
			}
		}
		return n
	}
	before := assigns()

	// The create's change, late.
	if rt, err := c.driver.Drive(ctx, driver.Change{Next: &j, Rev: rev1}); rt != driver.RouteLocal || err != nil {
		t.Fatalf("Drive = %s, %v", rt, err)
	}
	// Its commands are stored when Drive returns: the last command to
	// edge-1 is still the unassign.
	s, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, protocol.CommandSubject("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := protocol.DecodeCommand(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if last.Kind != protocol.CmdUnassign {
		t.Fatalf("last command to edge-1 after the late create: %s %+v; want the unassign of the move", last.Kind, last.Assign)
	}
	eventually(t, 10*time.Second, "edge-2 assigned generation 2 again", func() bool { return assigns() > before })
}
