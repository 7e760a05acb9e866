package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// heartbeatClaims sends a heartbeat claiming leases and returns the reply.
func (a *testAgent) heartbeatClaims(claims ...protocol.HeldLease) protocol.HeartbeatReply {
	a.t.Helper()
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: a.id, SentAt: time.Now(), Leases: claims})
	if err != nil {
		a.t.Fatal(err)
	}
	msg, err := a.nc.Request(protocol.HeartbeatSubject(a.id), data, 10*time.Second)
	if err != nil {
		a.t.Fatalf("heartbeat: %v", err)
	}
	hr, err := protocol.DecodeHeartbeatReply(msg.Data)
	if err != nil {
		a.t.Fatalf("heartbeat reply: %v", err)
	}
	return hr
}

func assignWithEpoch(jobID string, above uint64) func(protocol.Command) bool {
	return func(c protocol.Command) bool {
		return c.Kind == protocol.CmdAssign && c.Assign.Job.ID == jobID && c.Assign.Epoch > above
	}
}

func hasUnassignOf(jobID string) func(protocol.Command) bool {
	return func(c protocol.Command) bool { return c.Kind == protocol.CmdUnassign && c.Unassign.JobID == jobID }
}

// TestGroupLeaseLifecycle walks a group job's lease through the protocol:
// granted to one member with an epoch; renewed only for its holder at its
// epoch (the TTL granted is below the controller's); moved to the other
// member with a higher epoch only after the holder's own lease has ended;
// the lost holder is told to stop; its running execution goes to
// RETRY_WAITING (agent_lost) on the new holder, which gets the retry; its
// late reports change nothing; agent ls and the metrics show the move.
func TestGroupLeaseLifecycle(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 3 * time.Second
	cfg.LeaseTTL = time.Second
	cfg.LeaseRenewInterval = 200 * time.Millisecond
	c := startController(t, cfg)
	ctx := tctx(t)
	labels := map[string]string{"role": "pump"}
	members := map[string]*testAgent{
		"g1": newTestAgent(t, c.NATSURL(), "g1", labels).start(),
		"g2": newTestAgent(t, c.NATSURL(), "g2", labels).start(),
	}
	job, err := c.CreateJob(ctx, protocol.Job{Name: "pump", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "role=pump"}, Retry: protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}

	// Granted to exactly one member, with an epoch.
	var h, o *testAgent
	var epoch uint64
	eventually(t, 10*time.Second, "group lease granted", func() bool {
		for id, a := range members {
			for _, cmd := range a.commands() {
				if assignWithEpoch(job.ID, 0)(cmd) {
					h, epoch = a, cmd.Assign.Epoch
					o = members[map[string]string{"g1": "g2", "g2": "g1"}[id]]
					return true
				}
			}
		}
		return false
	})
	claim := protocol.HeldLease{JobID: job.ID, Epoch: epoch}

	// Renewed for the holder at its epoch, for less than the controller's TTL.
	hr := h.heartbeatClaims(claim)
	if len(hr.Renewed) != 1 || hr.Renewed[0].Epoch != epoch || len(hr.Lost) != 0 {
		t.Fatalf("holder's renewal: %+v", hr)
	}
	if ttl := hr.Renewed[0].TTL.D(); ttl <= 0 || ttl >= cfg.LeaseTTL {
		t.Fatalf("renewal TTL %s, want in (0, %s)", ttl, cfg.LeaseTTL)
	}
	// Not for another member, nor for an older epoch.
	if hr := o.heartbeatClaims(claim); len(hr.Renewed) != 0 || len(hr.Lost) != 1 {
		t.Fatalf("non-holder's claim: %+v", hr)
	}
	if hr := h.heartbeatClaims(protocol.HeldLease{JobID: job.ID, Epoch: epoch - 1}); len(hr.Renewed) != 0 || len(hr.Lost) != 1 {
		t.Fatalf("old epoch claim: %+v", hr)
	}
	if as, _ := c.ListAgents(ctx); !slices.ContainsFunc(as, func(a protocol.AgentInfo) bool {
		return a.Agent == h.id && slices.Equal(a.Leases, []protocol.HeldLease{claim})
	}) {
		t.Fatalf("agent ls does not show %s holding %v: %+v", h.id, claim, as)
	}

	// The holder fires and starts an execution under its epoch.
	x := protocol.ExecID(job.ID, time.Now().Truncate(time.Millisecond))
	trig := h.rep(job.ID, x, 1, protocol.ReportTriggered, time.Now())
	trig.Epoch = epoch
	h.publish(trig, "")
	run := h.rep(job.ID, x, 1, protocol.ReportRunning, trig.ScheduledAt)
	run.Epoch = epoch
	h.publish(run, "")
	waitExec(t, c, x, "RUNNING on the holder", inState(protocol.StateRunning))

	// The holder goes silent; the other member keeps heartbeating. The
	// lease moves only after the holder's own lease ended.
	lastRenewal := time.Now()
	if hr := h.heartbeatClaims(claim); len(hr.Renewed) != 1 {
		t.Fatalf("last renewal: %+v", hr)
	}
	holderEnd := lastRenewal.Add(hr.Renewed[0].TTL.D())
	var moved protocol.Command
	eventually(t, 15*time.Second, "lease moved to "+o.id, func() bool {
		o.heartbeatClaims()
		for _, cmd := range o.commands() {
			if assignWithEpoch(job.ID, epoch)(cmd) {
				moved = cmd
				return true
			}
		}
		return false
	})
	if now := time.Now(); now.Before(holderEnd) {
		t.Fatalf("lease moved at %s, before the holder's own lease ended at %s", now, holderEnd)
	}
	newEpoch := moved.Assign.Epoch
	// From here the new holder renews its lease like a real agent would.
	stopRenew := make(chan struct{})
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for {
			data, _ := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: o.id, SentAt: time.Now(),
				Leases: []protocol.HeldLease{{JobID: job.ID, Epoch: newEpoch}}})
			_, _ = o.nc.Request(protocol.HeartbeatSubject(o.id), data, 5*time.Second)
			select {
			case <-stopRenew:
				return
			case <-time.After(cfg.HeartbeatInterval):
			}
		}
	}()
	t.Cleanup(func() { close(stopRenew); <-renewDone })
	h.waitCommand("unassign of the lost holder", hasUnassignOf(job.ID))
	if hr := h.heartbeatClaims(claim); len(hr.Lost) != 1 || len(hr.Renewed) != 0 {
		t.Fatalf("lost holder's claim after the move: %+v", hr)
	}
	if hr := o.heartbeatClaims(protocol.HeldLease{JobID: job.ID, Epoch: newEpoch}); len(hr.Renewed) != 1 {
		t.Fatalf("new holder's claim: %+v", hr)
	}

	// The running execution moved with the lease: RETRY_WAITING on the new
	// holder (agent_lost), whose retry is sent there with the new epoch.
	e := waitExec(t, c, x, "moved off the lost agent", func(e protocol.Execution) bool {
		return e.Agent == o.id && e.Epoch == newEpoch && e.Outcome == retry.OutcomeAgentLost
	})
	if e.Reason != retry.ReasonAgentLost {
		t.Fatalf("moved execution %+v, want reason %s", e, retry.ReasonAgentLost)
	}
	retryCmd := o.waitCommand("retry on the new holder", isRun(x, 2))
	if retryCmd.Run.Epoch != newEpoch {
		t.Fatalf("retry sent with epoch %d, want %d", retryCmd.Run.Epoch, newEpoch)
	}

	// Late reports of the old epoch change nothing.
	rejected := c.m.rejected.Load()
	late := finished(h.rep(job.ID, x, 1, protocol.ReportFinished, trig.ScheduledAt), retry.OutcomeSuccess, retry.Result{}, time.Millisecond)
	late.Epoch = epoch
	h.publish(late, "")
	y := protocol.ExecID(job.ID, time.Now().Add(time.Minute).Truncate(time.Millisecond))
	stale := h.rep(job.ID, y, 1, protocol.ReportTriggered, time.Now())
	stale.Epoch = epoch
	h.publish(stale, "")
	eventually(t, 10*time.Second, "stale reports rejected", func() bool { return c.m.rejected.Load() >= rejected+2 })
	if got, err := c.GetExecution(ctx, x); err != nil || got.State != protocol.StateRetryWaiting || got.Agent != o.id {
		t.Fatalf("execution after a stale report: %+v, %v", got, err)
	}
	if _, err := c.GetExecution(ctx, y); err == nil {
		t.Fatalf("a stale epoch's fire was recorded")
	}

	// The new holder's retry, under the new epoch, applies.
	for _, kind := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished} {
		r := o.rep(job.ID, x, 2, kind, trig.ScheduledAt)
		if kind == protocol.ReportFinished {
			r = finished(r, retry.OutcomeSuccess, retry.Result{}, time.Millisecond)
		}
		r.Epoch = newEpoch
		o.publish(r, "")
	}
	waitExec(t, c, x, "SUCCESS on the new holder", inState(protocol.StateSuccess))

	mf := gather(t, c)
	if v := mf["ax_lease_takeovers_total"]; v < 1 {
		t.Errorf("ax_lease_takeovers_total = %v, want ≥ 1", v)
	}
	if v := mf["ax_lease_grants_total"]; v < 2 {
		t.Errorf("ax_lease_grants_total = %v, want ≥ 2", v)
	}
	if v := mf["ax_lease_expiries_total"]; v < 1 {
		t.Errorf("ax_lease_expiries_total = %v, want ≥ 1", v)
	}
	if v := mf["ax_lease_failover_seconds_count"]; v < 1 {
		t.Errorf("ax_lease_failover_seconds count = %v, want ≥ 1", v)
	}
	if v := mf["ax_shards_owned"]; v != float64(cfg.Shards) {
		t.Errorf("ax_shards_owned = %v, want %d", v, cfg.Shards)
	}
}

// gather returns every metric of c summed over its labels by name (a
// histogram as <name>_count).
func gather(t testing.TB, c *Controller) map[string]float64 {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[mf.GetName()] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[mf.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
