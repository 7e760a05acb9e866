package controller

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// heartbeatClaims sends a heartbeat claiming leases and returns the reply.
func (a *testAgent) heartbeatClaims(claims ...protocol.HeldLease) protocol.HeartbeatReply {
	a.t.Helper()
	return a.sendHeartbeat(protocol.Heartbeat{Leases: claims})
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
// leaseFixture is a controller (lease TTL 1s) with two test agents in
// group role=pump and a group job leased to one of them: h holds it at
// epoch, o is the other member.
type leaseFixture struct {
	c     *Controller
	cfg   Config
	job   protocol.Job
	h, o  *testAgent
	epoch uint64
}

func newLeaseFixture(t *testing.T, maxAttempts int) *leaseFixture {
	t.Helper()
	return newLeaseFixtureWith(t, maxAttempts, nil)
}

// newLeaseFixtureWith is newLeaseFixture with the config changed by mod.
func newLeaseFixtureWith(t *testing.T, maxAttempts int, mod func(*Config)) *leaseFixture {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 3 * time.Second
	cfg.LeaseTTL = time.Second
	cfg.LeaseRenewInterval = 200 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	c := startController(t, cfg)
	labels := map[string]string{"role": "pump"}
	members := map[string]*testAgent{
		"g1": newTestAgent(t, c.NATSURL(), "g1", labels).start(),
		"g2": newTestAgent(t, c.NATSURL(), "g2", labels).start(),
	}
	job, err := c.CreateJob(tctx(t), protocol.Job{Name: "pump", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "role=pump"}, Retry: protocol.RetrySpec{MaxAttempts: maxAttempts, Base: protocol.Duration(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	f := &leaseFixture{c: c, cfg: cfg, job: job}
	eventually(t, 10*time.Second, "group lease granted", func() bool {
		for id, a := range members {
			for _, cmd := range a.commands() {
				if assignWithEpoch(job.ID, 0)(cmd) {
					f.h, f.epoch = a, cmd.Assign.Epoch
					f.o = members[map[string]string{"g1": "g2", "g2": "g1"}[id]]
					return true
				}
			}
		}
		return false
	})
	return f
}

// moveToOther lets the holder go silent while the other member heartbeats,
// until the lease moves to it; from then on the new holder renews in the
// background. It returns the new holder's assign command.
func (f *leaseFixture) moveToOther(t *testing.T) protocol.Command {
	t.Helper()
	var moved protocol.Command
	eventually(t, 15*time.Second, "lease moved to "+f.o.id, func() bool {
		f.o.heartbeatClaims()
		for _, cmd := range f.o.commands() {
			if assignWithEpoch(f.job.ID, f.epoch)(cmd) {
				moved = cmd
				return true
			}
		}
		return false
	})
	newEpoch := moved.Assign.Epoch
	stopRenew := make(chan struct{})
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for {
			data, _ := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: f.o.id, SentAt: time.Now(),
				Leases: []protocol.HeldLease{{JobID: f.job.ID, Epoch: newEpoch}}})
			_, _ = f.o.nc.Request(protocol.HeartbeatSubject(f.o.id), data, 5*time.Second)
			select {
			case <-stopRenew:
				return
			case <-time.After(f.cfg.HeartbeatInterval):
			}
		}
	}()
	t.Cleanup(func() { close(stopRenew); <-renewDone })
	return moved
}

// report publishes one report of agent a under epoch.
func report(a *testAgent, job, exec string, attempt int, kind protocol.ReportKind, scheduled time.Time, epoch uint64, o retry.Outcome, res retry.Result) {
	r := a.rep(job, exec, attempt, kind, scheduled)
	if kind == protocol.ReportFinished {
		r = finished(r, o, res, time.Millisecond)
	}
	r.Epoch = epoch
	a.publish(r, "")
}

// renew has the holder renew its lease and returns when that lease ends
// on the holder's clock (TTL from the heartbeat's send).
func (f *leaseFixture) renew(t *testing.T) time.Time {
	t.Helper()
	sent := time.Now()
	hr := f.h.heartbeatClaims(protocol.HeldLease{JobID: f.job.ID, Epoch: f.epoch})
	if len(hr.Renewed) != 1 {
		t.Fatalf("renewal: %+v", hr)
	}
	return sent.Add(hr.Renewed[0].TTL.D())
}

// notMovedUntil has the other member heartbeat until end and fails if it
// is given the job meanwhile (why says what must not move it).
func (f *leaseFixture) notMovedUntil(t *testing.T, end time.Time, why string) {
	t.Helper()
	for time.Now().Before(end) {
		f.o.heartbeatClaims()
		if slices.ContainsFunc(f.o.commands(), assignWithEpoch(f.job.ID, f.epoch)) {
			t.Fatalf("lease moved to %s %s before the holder's lease ends: %s", f.o.id, time.Until(end), why)
		}
	}
}

func TestGroupLeaseLifecycle(t *testing.T) {
	f := newLeaseFixture(t, 3)
	c, cfg, job, h, o, epoch := f.c, f.cfg, f.job, f.h, f.o, f.epoch
	ctx := tctx(t)
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
	moved := f.moveToOther(t)
	newEpoch := moved.Assign.Epoch
	if moved.IssuedAt.Before(holderEnd) {
		t.Fatalf("lease moved at %s, before the holder's own lease ended at %s", moved.IssuedAt, holderEnd)
	}
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

	// Late reports of the old epoch: the attempt moved to the new holder
	// changes nothing, and a fire scheduled long after the epoch ended is
	// refused; a fire the holder made under its epoch while its lease was
	// valid is an execution like any other, recorded when its reports come.
	rejected := c.m.rejected.Load()
	late := finished(h.rep(job.ID, x, 1, protocol.ReportFinished, trig.ScheduledAt), retry.OutcomeSuccess, retry.Result{}, time.Millisecond)
	late.Epoch = epoch
	h.publish(late, "")
	y := protocol.ExecID(job.ID, time.Now().Add(10*time.Minute).Truncate(time.Millisecond))
	stale := h.rep(job.ID, y, 1, protocol.ReportTriggered, time.Now())
	stale.Epoch = epoch
	h.publish(stale, "")
	eventually(t, 10*time.Second, "stale reports rejected", func() bool { return c.m.rejected.Load() >= rejected+2 })
	if got, err := c.GetExecution(ctx, x); err != nil || got.State != protocol.StateRetryWaiting || got.Agent != o.id {
		t.Fatalf("execution after a stale report: %+v, %v", got, err)
	}
	if _, err := c.GetExecution(ctx, y); err == nil {
		t.Fatalf("a fire scheduled after its epoch ended was recorded")
	}
	if v := testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectNotAssigned)); v != 1 {
		t.Fatalf("ax_reports_rejected_total{reason=not_assigned} = %v, want 1", v)
	}
	zAt := lastRenewal.Truncate(time.Millisecond)
	z := protocol.ExecID(job.ID, zAt)
	for _, kind := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished} {
		report(h, job.ID, z, 1, kind, zAt, epoch, retry.OutcomeSuccess, retry.Result{})
	}
	if e := waitExec(t, c, z, "SUCCESS: fired by the old holder while its lease was valid", inState(protocol.StateSuccess)); e.Agent != h.id || e.Epoch != epoch {
		t.Fatalf("late fire recorded as %+v, want agent %s epoch %d", e, h.id, epoch)
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

// TestGroupLeaseLostRetryIsCounted: a retry already sent to the holder
// when its lease lapses counts as a lost attempt, so the new holder runs a
// higher attempt and the old holder's late run of the sent one is refused.
func TestGroupLeaseLostRetryIsCounted(t *testing.T) {
	f := newLeaseFixture(t, 5)
	c, h, o := f.c, f.h, f.o
	claim := protocol.HeldLease{JobID: f.job.ID, Epoch: f.epoch}
	if hr := h.heartbeatClaims(claim); len(hr.Renewed) != 1 {
		t.Fatalf("renewal: %+v", hr)
	}
	scheduled := time.Now().Truncate(time.Millisecond)
	x := protocol.ExecID(f.job.ID, scheduled)
	for _, k := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished} {
		report(h, f.job.ID, x, 1, k, scheduled, f.epoch, retry.OutcomeFailure, retry.Result{Retryable: true, Message: "busy"})
	}
	h.waitCommand("retry sent to the holder", isRun(x, 2))
	waitExec(t, c, x, "RETRY_WAITING after attempt 1", func(e protocol.Execution) bool {
		return e.State == protocol.StateRetryWaiting && e.Attempt == 1
	})

	moved := f.moveToOther(t)
	newEpoch := moved.Assign.Epoch
	e := waitExec(t, c, x, "attempt 2 counted as lost", func(e protocol.Execution) bool {
		return e.Attempt == 2 && e.Agent == o.id && e.Epoch == newEpoch
	})
	if e.State != protocol.StateRetryWaiting || e.Outcome != retry.OutcomeAgentLost {
		t.Fatalf("execution after the move: %+v", e)
	}
	run := o.waitCommand("attempt 3 on the new holder", isRun(x, 3))
	if run.Run.Epoch != newEpoch {
		t.Fatalf("attempt 3 sent with epoch %d, want %d", run.Run.Epoch, newEpoch)
	}
	// The old holder runs the attempt 2 it was sent, late: refused.
	rejected := c.m.rejected.Load()
	report(h, f.job.ID, x, 2, protocol.ReportTriggered, scheduled, f.epoch, "", retry.Result{})
	eventually(t, 10*time.Second, "late attempt refused", func() bool { return c.m.rejected.Load() > rejected })
	for _, k := range []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished} {
		report(o, f.job.ID, x, 3, k, scheduled, newEpoch, retry.OutcomeSuccess, retry.Result{})
	}
	waitExec(t, c, x, "SUCCESS at attempt 3", func(e protocol.Execution) bool {
		return e.State == protocol.StateSuccess && e.Attempt == 3 && e.Agent == o.id
	})
}

// TestStaleStoppingHeartbeatIgnored: a "stopping" heartbeat of an earlier
// run of the agent process (delivered late, after the agent restarted and
// registered again) does not hand back the lease the current run holds:
// the job stays with it until its renewed lease would end.
func TestStaleStoppingHeartbeatIgnored(t *testing.T) {
	f := newLeaseFixture(t, 3)
	holderEnd := f.renew(t)
	claim := protocol.HeldLease{JobID: f.job.ID, Epoch: f.epoch}
	if hr := f.h.sendHeartbeat(protocol.Heartbeat{Leases: []protocol.HeldLease{claim}, Stopping: true, Boot: "earlier-run"}); len(hr.Lost) != 1 {
		t.Fatalf("stale stopping heartbeat reply: %+v", hr)
	}
	f.notMovedUntil(t, holderEnd, "a stopping heartbeat of an earlier run of the agent")
	if as, _ := f.c.ListAgents(tctx(t)); !slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == f.h.id && a.Online }) {
		t.Fatalf("a stale stopping heartbeat took %s offline: %+v", f.h.id, as)
	}
}

// barrierKV is ax_leases whose Updates, once armed, each wait until want
// of them are in flight together (or their context ends), then go to the
// real bucket.
type barrierKV struct {
	jetstream.KeyValue
	armed   atomic.Bool
	want    int
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func (k *barrierKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.armed.Load() {
		k.mu.Lock()
		if k.waiting++; k.waiting == k.want {
			close(k.all)
		}
		k.mu.Unlock()
		select {
		case <-k.all:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

// The lease claims of one heartbeat are renewed together, not one after
// another: with every renewal of ax_leases waiting until all of the
// heartbeat's are in flight, both of an agent's leases are renewed (one
// at a time, the first waited for the second until the heartbeat's
// deadline and neither was).
func TestHeartbeatRenewsLeasesTogether(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 3 * time.Second
	cfg.LeaseTTL = 2 * time.Second
	cfg.LeaseRenewInterval = 200 * time.Millisecond
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases := &barrierKV{want: 2, all: make(chan struct{})}
	c.hooks.wrapKV = func(kv jetstream.KeyValue) jetstream.KeyValue {
		if kv.Bucket() != protocol.BucketLeases {
			return kv
		}
		leases.KeyValue = kv
		return leases
	}
	ctx := tctx(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ag := newTestAgent(t, c.NATSURL(), "g1", map[string]string{"role": "pump"}).start()
	var claims []protocol.HeldLease
	for _, name := range []string{"pump-a", "pump-b"} {
		job, err := c.CreateJob(ctx, protocol.Job{Name: name, Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
			Target: protocol.Target{Group: "role=pump"}})
		if err != nil {
			t.Fatal(err)
		}
		cmd := ag.waitCommand("lease of "+name, assignWithEpoch(job.ID, 0))
		claims = append(claims, protocol.HeldLease{JobID: job.ID, Epoch: cmd.Assign.Epoch})
	}
	leases.armed.Store(true)
	hr := ag.heartbeatClaims(claims...)
	if len(hr.Renewed) != 2 || len(hr.Lost) != 0 {
		t.Fatalf("heartbeat claiming 2 leases: renewed %+v, lost %+v; want both renewed", hr.Renewed, hr.Lost)
	}
}
