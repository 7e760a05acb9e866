package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// Group-job failover between agents (docs/architecture.md: Leases and epochs): the lease moves
// when its holder dies or is cut off, within the lease TTL plus a second,
// and the fencing invariants hold across the move.

const (
	failoverTTL   = 1500 * time.Millisecond
	failoverRenew = 300 * time.Millisecond
	// killHold is how long a run of TestGroupLeaseKill9Holder's handler
	// lasts after it wrote its line: the window in which the holder is
	// killed mid-run.
	killHold = 150 * time.Millisecond
)

// failoverCtl starts a controller with the short lease TTL of these tests
// (heartbeats every 200ms, from ctlConfig).
func failoverCtl(tb testing.TB, ttl time.Duration) *controller.Controller {
	tb.Helper()
	cfg := ctlConfig(tb.TempDir(), -1)
	cfg.LeaseTTL = ttl
	cfg.LeaseRenewInterval = min(failoverRenew, ttl/3)
	return startCtl(tb, cfg)
}

// pumpJob is the group job of these tests: every 200ms on one agent of
// role=pump, with retries so that an execution lost with its agent runs
// again (a counted retry) on the new holder.
func pumpJob(tb testing.TB, c *controller.Controller) protocol.Job {
	tb.Helper()
	return createJob(tb, c, protocol.Job{Name: "pump", Handler: "record", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Group: "role=pump"},
		Retry:  protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(100 * time.Millisecond)}})
}

// waitHolder waits until the agents list shows one online agent other
// than not holding jobID's lease, and returns it with its epoch.
func waitHolder(tb testing.TB, c *controller.Controller, jobID, not string) (string, uint64) {
	tb.Helper()
	var holder string
	var epoch uint64
	var last []protocol.AgentInfo
	testutil.EventuallyFunc(tb, 20*time.Second, func() string {
		return fmt.Sprintf("an online agent other than %q holding %s; agents %+v", not, jobID, last)
	}, func() bool {
		as, err := c.ListAgents(context.Background())
		if err != nil {
			return false
		}
		last = as
		holder = ""
		for _, a := range as {
			for _, l := range a.Leases {
				if l.JobID != jobID {
					continue
				}
				if holder != "" || !a.Online || a.Agent == not {
					return false
				}
				holder, epoch = a.Agent, l.Epoch
			}
		}
		return holder != ""
	})
	return holder, epoch
}

// firstFire is the first scheduled fire (attempt 1) in fs by an agent
// other than not at or after t.
func firstFire(fs []groupFire, not string, t time.Time) (groupFire, bool) {
	for _, f := range fs {
		if f.agent != not && f.attempt == 1 && !f.at.Before(t) {
			return f, true
		}
	}
	return groupFire{}, false
}

// counter sums the values of the metric family name whose labels include
// label=value in the controller's registry.
func counter(tb testing.TB, c *controller.Controller, name, label, value string) float64 {
	tb.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// checkRetries asserts that an exec id that ran more than once ran each
// time at a higher attempt than before, and that the controller counted
// those attempts (its record of the execution reaches that attempt).
func checkRetries(tb testing.TB, c *controller.Controller, fires []groupFire) (retried int) {
	tb.Helper()
	byExec := map[string][]groupFire{}
	for _, f := range fires {
		byExec[f.execID] = append(byExec[f.execID], f)
	}
	for id, fs := range byExec {
		if len(fs) < 2 {
			continue
		}
		retried++
		slices.SortFunc(fs, func(a, b groupFire) int { return a.at.Compare(b.at) })
		for i := 1; i < len(fs); i++ {
			if fs[i].attempt <= fs[i-1].attempt {
				tb.Errorf("%s ran at attempt %d on %s and then at attempt %d on %s: not a retry",
					id, fs[i-1].attempt, fs[i-1].agent, fs[i].attempt, fs[i].agent)
			}
		}
		top := fs[len(fs)-1].attempt
		var e protocol.Execution
		var err error
		// The controller moves the attempt on when the retry's reports arrive.
		testutil.EventuallyFunc(tb, 20*time.Second, func() string {
			return fmt.Sprintf("%s ran at attempt %d: the controller counting it; record %+v (err %v)", id, top, e, err)
		}, func() bool {
			e, err = c.GetExecution(context.Background(), id)
			return err == nil && e.Attempt >= top
		})
		tb.Logf("%s ran %d times (attempts up to %d); controller: attempt %d %s", id, len(fs), top, e.Attempt, e.State)
	}
	return retried
}

// TestGroupLeaseKill9Holder: three agent processes in group role=pump and
// a group job every 200ms whose handler appends "agent exec_id attempt
// epoch unix_nanos" to one shared file (each run then lasts 150ms).
// SIGKILL of the holder in the middle of a run the controller knows about
// moves the lease: another agent fires within lease TTL + 1 s of the kill,
// at a higher epoch, and the run lost with the holder runs again there as
// a retry (agent_lost). Over the whole file no two agents fired inside the
// same epoch, no (exec id, attempt) ran twice, and an exec id that ran
// twice ran again at a higher attempt that the controller counted. The
// controller counts the takeover (ax_lease_takeovers_total{kind="group"})
// and lists the new holder's lease.
func TestGroupLeaseKill9Holder(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns agent processes")
	}
	c := failoverCtl(t, failoverTTL)
	fires := filepath.Join(t.TempDir(), "fires.log")
	procs := map[string]*agentProc{}
	for _, id := range []string{"pump-a", "pump-b", "pump-c"} {
		procs[id] = startAgentProc(t, id, c.NATSURL(), "role=pump", fires, killHold)
	}
	for id := range procs {
		waitAgentOnline(t, c, id)
	}
	j := pumpJob(t, c)

	var fs []groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return fmt.Sprintf("5 fires; have %d", len(fs)) },
		func() bool { fs = readFires(t, fires); return len(fs) >= 5 })
	holder, epoch := waitHolder(t, c, j.ID, "")
	if last := fs[len(fs)-1]; last.agent != holder || last.epoch != epoch {
		t.Fatalf("last fire by %s at epoch %d, but the agents list shows %s holding epoch %d", last.agent, last.epoch, holder, epoch)
	}
	takeovers0 := counter(t, c, "ax_lease_takeovers_total", "kind", "group")

	// Kill the holder in the middle of a run the controller knows about
	// (TRIGGERED or RUNNING), so that the run is lost with it.
	var victim groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "a run of " + holder + " in progress" }, func() bool {
		fs := readFires(t, fires)
		f := fs[len(fs)-1]
		if f.agent != holder || time.Since(f.at) > killHold/2 {
			return false
		}
		e, err := c.GetExecution(context.Background(), f.execID)
		if err != nil || e.Agent != holder || e.Attempt != f.attempt || (e.State != protocol.StateTriggered && e.State != protocol.StateRunning) {
			return false
		}
		victim = f
		return true
	})
	killed := time.Now()
	procs[holder].kill()
	midRun := killed.Sub(victim.at) < killHold // the handler had not returned: no SUCCESS was sent
	var next groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "a fire by a new holder after the kill of " + holder }, func() bool {
		var ok bool
		next, ok = firstFire(readFires(t, fires), holder, killed)
		return ok
	})
	took, budget := next.at.Sub(killed), failoverTTL+time.Second
	t.Logf("holder %s (epoch %d) killed %s into run %s; %s fired %s later at epoch %d",
		holder, epoch, killed.Sub(victim.at), victim.execID, next.agent, took, next.epoch)
	if took > budget {
		t.Errorf("failover took %s, budget lease TTL + 1s = %s", took, budget)
	}
	if next.epoch <= epoch {
		t.Errorf("new holder %s fired at epoch %d, not above the dead holder's %d", next.agent, next.epoch, epoch)
	}
	if midRun {
		// The lost run is retried (agent_lost) on the new holder.
		testutil.EventuallyFunc(t, 20*time.Second, func() string { return victim.execID + " run again after the kill" }, func() bool {
			return slices.ContainsFunc(readFires(t, fires), func(f groupFire) bool {
				return f.execID == victim.execID && f.agent != holder && f.attempt > victim.attempt
			})
		})
	} else {
		t.Logf("the kill came %s into the run, after it ended: its retry is not required", killed.Sub(victim.at))
	}

	// Let it run a bit more: five more fires by the new holder.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "5 more fires by " + next.agent }, func() bool {
		n := 0
		for _, f := range readFires(t, fires) {
			if f.agent == next.agent && f.attempt == 1 && f.at.After(next.at) {
				n++
			}
		}
		return n >= 5
	})
	if h, e := waitHolder(t, c, j.ID, holder); h != next.agent || e != next.epoch {
		t.Errorf("agents list shows %s holding epoch %d, want %s at epoch %d", h, e, next.agent, next.epoch)
	}
	if n := counter(t, c, "ax_lease_takeovers_total", "kind", "group"); n < takeovers0+1 {
		t.Errorf("ax_lease_takeovers_total{kind=group} = %v, want ≥ %v", n, takeovers0+1)
	}

	all := readFires(t, fires)
	checkFencing(t, all)
	retried := checkRetries(t, c, all)
	for _, f := range all {
		if f.agent == holder && f.at.After(killed) {
			t.Errorf("killed holder %s ran %s after the kill", holder, f.execID)
		}
	}
	t.Logf("%d runs in the fire file, %d exec ids retried", len(all), retried)
}

// TestGroupLeasePartitionedHolder: three in-process agents of group
// role=pump, each linked to NATS through its own fault proxy. Cutting the
// holder's link (its process stays alive) moves the lease: the old
// holder's last fire happens strictly before the new holder's first fire,
// within lease TTL + 1 s of the cut. After the link heals, the old holder
// is back (heartbeats reach the controller) but learns it lost the lease
// and never fires the job again while the new holder is alive.
func TestGroupLeasePartitionedHolder(t *testing.T) {
	c := failoverCtl(t, failoverTTL)
	u, err := url.Parse(c.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	log := &fireLog{}
	proxies := map[string]*faultproxy.Proxy{}
	for _, id := range []string{"pump-a", "pump-b", "pump-c"} {
		p, err := faultproxy.New(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies[id] = p
		startAgent(t, agentConfig(id, p.URL(), t.TempDir(), map[string]string{"role": "pump"}),
			agent.WithHandler("record", log.handler(id)))
	}
	for id := range proxies {
		waitAgentOnline(t, c, id)
	}
	j := pumpJob(t, c)
	testutil.Eventually(t, 20*time.Second, "5 fires", func() bool { return len(log.snapshot()) >= 5 })
	holder, epoch := waitHolder(t, c, j.ID, "")

	cut := time.Now()
	proxies[holder].Cut()
	var next groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "a fire by a new holder after cutting " + holder }, func() bool {
		var ok bool
		next, ok = firstFire(log.snapshot(), holder, cut)
		return ok
	})
	var lastOld groupFire
	for _, f := range log.snapshot() {
		if f.agent == holder && f.at.After(lastOld.at) {
			lastOld = f
		}
	}
	t.Logf("cut %s (epoch %d): its last fire %s after the cut; %s fired %s after the cut at epoch %d (gap %s)",
		holder, epoch, lastOld.at.Sub(cut), next.agent, next.at.Sub(cut), next.epoch, next.at.Sub(lastOld.at))
	if !lastOld.at.Before(next.at) {
		t.Errorf("partitioned holder %s last fired at %s, not before the new holder %s first fired at %s",
			holder, lastOld.at.Format(time.StampMicro), next.agent, next.at.Format(time.StampMicro))
	}
	if took := next.at.Sub(cut); took > failoverTTL+time.Second {
		t.Errorf("failover took %s after the cut, budget %s", took, failoverTTL+time.Second)
	}
	if next.epoch <= epoch {
		t.Errorf("new holder fired at epoch %d, not above %d", next.epoch, epoch)
	}

	healed := time.Now()
	proxies[holder].Heal()
	// The old holder is back: a heartbeat of its own arrived after the heal
	// (its reply tells it the lease is lost).
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return holder + " heartbeating again after the heal" }, func() bool {
		as, err := c.ListAgents(context.Background())
		return err == nil && slices.ContainsFunc(as, func(a protocol.AgentInfo) bool {
			return a.Agent == holder && a.Online && a.HeartbeatAt.After(healed)
		})
	})
	back := time.Now()
	// A few periods: ten more fires by the new holder after it came back.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "10 fires by " + next.agent + " after the heal" }, func() bool {
		n := 0
		for _, f := range log.snapshot() {
			if f.agent == next.agent && f.attempt == 1 && f.at.After(back) {
				n++
			}
		}
		return n >= 10
	})
	for _, f := range log.snapshot() {
		if f.agent == holder && !f.at.Before(next.at) {
			t.Errorf("old holder %s ran %s (attempt %d, epoch %d) %s after the new holder's first fire",
				holder, f.execID, f.attempt, f.epoch, f.at.Sub(next.at))
		}
	}
	if h, e := waitHolder(t, c, j.ID, holder); h != next.agent || e != next.epoch {
		t.Errorf("agents list shows %s holding epoch %d, want %s at epoch %d", h, e, next.agent, next.epoch)
	}
	checkFencing(t, log.snapshot())
	t.Logf("reports rejected as old epoch: %v", counter(t, c, "ax_reports_rejected_total", "reason", "old_epoch"))
}
