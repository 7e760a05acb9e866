package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// Group-job fires at the edges of a lease (issue 11): a holder fires for
// up to 0.9 × lease_ttl after its last heartbeat, also while its link is
// cut or the controller is down. Those fires are executions like any
// other: recorded when their reports arrive, after the lease moved or was
// granted again, and retried on the job's holder of the time. Agents run
// in processes of their own, each linked to NATS through a TCP fault
// proxy; every run fails its first attempt (retryably).

// envFlakyAgent selects TestHelperFlakyAgentProcess in a child process.
const envFlakyAgent = "AX_E2E_FLAKY_AGENT"

// TestHelperFlakyAgentProcess is not a test: startFlakyAgent runs the test
// binary again with it to get an agent process whose handler "flaky"
// appends its run to the shared fire file (as fileHandler) and fails the
// first attempt of every execution, retryably.
func TestHelperFlakyAgentProcess(t *testing.T) {
	if os.Getenv(envFlakyAgent) == "" {
		t.Skip("helper process of the lease edge tests")
	}
	id := os.Getenv(envAgentID)
	labels := map[string]string{}
	for kv := range strings.SplitSeq(os.Getenv(envAgentLabels), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = v
		}
	}
	rec := fileHandler(t, id, os.Getenv(envAgentFires), 0)
	flaky := func(ctx context.Context, task agent.Task) agent.Result {
		if r := rec(ctx, task); r.Code != 0 {
			return r
		}
		if task.Attempt == 1 {
			return agent.Result{Code: 75, Message: "busy, try again", Retryable: true}
		}
		return agent.Result{}
	}
	runAgentChild(agent.New(agentConfig(id, os.Getenv(envAgentURL), os.Getenv(envAgentDir), labels),
		agent.WithLogger(testutil.Logger().With("who", id)), agent.WithHandler("flaky", flaky)))
}

// edgeAgents runs agents ids (group role=pump) in processes, each linked to
// the NATS server at natsURL through its own fault proxy, recording their
// runs in one fire file.
type edgeAgents struct {
	fires   string
	proxies map[string]*faultproxy.Proxy
	procs   map[string]*agentProc
}

func startEdgeAgents(t *testing.T, natsURL string, ids ...string) *edgeAgents {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	e := &edgeAgents{fires: filepath.Join(t.TempDir(), "fires.log"), proxies: map[string]*faultproxy.Proxy{}, procs: map[string]*agentProc{}}
	for _, id := range ids {
		p, err := faultproxy.New(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		e.proxies[id] = p
		env := []string{envFlakyAgent + "=1", envAgentID + "=" + id, envAgentURL + "=" + p.URL(), envAgentDir + "=" + t.TempDir(),
			envAgentLabels + "=role=pump", envAgentFires + "=" + e.fires}
		e.procs[id] = &agentProc{id: id, Child: testutil.StartChild(t, "TestHelperFlakyAgentProcess", env, 60*time.Second)}
	}
	return e
}

func (e *edgeAgents) read(t *testing.T) []groupFire { return readFires(t, e.fires) }

// edgeCtlConfig is a restartable controller config (store in dir, NATS on
// port) with the short lease TTL of the failover tests.
func edgeCtlConfig(dir string, port int) controller.Config {
	cfg := ctlConfig(dir, port)
	cfg.LeaseTTL = failoverTTL
	cfg.LeaseRenewInterval = failoverRenew
	return cfg
}

// flakyPumpJob is the group job of these tests: every 200ms on one agent
// of role=pump, each run failing its first attempt; retried after base.
func flakyPumpJob(t *testing.T, c *controller.Controller, base time.Duration) protocol.Job {
	t.Helper()
	return createJob(t, c, protocol.Job{Name: "pump", Handler: "flaky", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Group: "role=pump"},
		Retry:  protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(base), Max: protocol.Duration(base)}})
}

// firstAttempts returns the exec ids agent ran at attempt 1 under epoch
// (and after from, when not zero).
func firstAttempts(fs []groupFire, agent string, epoch uint64, from time.Time) []string {
	var out []string
	for _, f := range fs {
		if f.agent == agent && f.epoch == epoch && f.attempt == 1 && !f.at.Before(from) {
			out = append(out, f.execID)
		}
	}
	return out
}

// waitAllSucceed waits until every execution of ids is SUCCESS at attempt
// 2 or later, and returns them.
func waitAllSucceed(t *testing.T, c *controller.Controller, ids []string, why string) map[string]protocol.Execution {
	t.Helper()
	out := map[string]protocol.Execution{}
	var pending []string
	testutil.EventuallyFunc(t, 60*time.Second, func() string {
		var s []string
		for _, id := range pending {
			e, err := c.GetExecution(context.Background(), id)
			s = append(s, fmt.Sprintf("%s: %s a%d on %s epoch %d %s (err %v)", id[len(id)-6:], e.State, e.Attempt, e.Agent, e.Epoch, e.Reason, err))
		}
		return fmt.Sprintf("%d executions (%s) SUCCESS; not yet: %v", len(ids), why, s)
	}, func() bool {
		pending = pending[:0]
		for _, id := range ids {
			e, err := c.GetExecution(context.Background(), id)
			if err != nil || e.State != protocol.StateSuccess || e.Attempt < 2 {
				pending = append(pending, id)
				continue
			}
			out[id] = e
		}
		return len(pending) == 0
	})
	return out
}

// TestLeaseEdgeFiresOfACutHolder: the holder's link is cut. It keeps
// firing until its own lease ends (every first attempt fails retryably);
// the lease moves to the other member with a higher epoch. When the link
// heals, the cut holder's reports of those fires, under its old epoch,
// arrive: each is recorded (it fired while it held a valid lease), and its
// retry runs on the new holder, under the new epoch, to SUCCESS.
func TestLeaseEdgeFiresOfACutHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns agent processes")
	}
	c := failoverCtl(t, failoverTTL)
	ea := startEdgeAgents(t, c.NATSURL(), "pump-a", "pump-b")
	for id := range ea.procs {
		waitAgentOnline(t, c, id)
	}
	j := flakyPumpJob(t, c, 100*time.Millisecond)
	testutil.Eventually(t, 20*time.Second, "3 fires", func() bool { return len(ea.read(t)) >= 3 })
	holder, epoch := waitHolder(t, c, j.ID, "")

	cut := time.Now()
	ea.proxies[holder].Cut()
	next, newEpoch := waitHolder(t, c, j.ID, holder)
	cutFires := firstAttempts(ea.read(t), holder, epoch, cut)
	t.Logf("cut %s (epoch %d); it fired %d times after the cut; %s holds epoch %d", holder, epoch, len(cutFires), next, newEpoch)
	if len(cutFires) == 0 {
		t.Fatalf("%s did not fire after its link was cut: nothing to check", holder)
	}

	ea.proxies[holder].Heal()
	got := waitAllSucceed(t, c, cutFires, "fired by "+holder+" while its link was cut")
	runs := ea.read(t)
	for _, id := range cutFires {
		if e := got[id]; e.Agent != next || e.Epoch < newEpoch {
			t.Errorf("%s: retry ran on %s at epoch %d, want the holder %s at epoch ≥ %d", id, e.Agent, e.Epoch, next, newEpoch)
		}
		if !slices.ContainsFunc(runs, func(f groupFire) bool { return f.execID == id && f.attempt >= 2 && f.agent == next }) {
			t.Errorf("%s: no retry by %s in the fire file", id, next)
		}
	}
	checkFencing(t, runs)
	if v := counter(t, c, "ax_reports_rejected_total", "reason", "not_assigned"); v != 0 {
		t.Errorf("%v reports rejected as not_assigned", v)
	}
}

// TestLeaseEdgeControllerOutage: the controller is down for longer than
// lease_ttl, so the lease key expires; the holder fires until its own
// lease ends, and its link stays cut while the controller comes back and
// grants the job afresh (not as a takeover) to the other member. When the
// link heals, the fires of the outage arrive under the old epoch: they are
// recorded and retried on the new holder; and executions that waited in
// RETRY_WAITING through the outage run their retries there too.
func TestLeaseEdgeControllerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns agent processes")
	}
	dir, port := t.TempDir(), testutil.FreePort(t)
	cfg := edgeCtlConfig(dir, port)
	c1 := startCtl(t, cfg)
	ea := startEdgeAgents(t, c1.NATSURL(), "pump-a", "pump-b")
	for id := range ea.procs {
		waitAgentOnline(t, c1, id)
	}
	j := flakyPumpJob(t, c1, time.Second)
	testutil.Eventually(t, 20*time.Second, "5 fires", func() bool { return len(ea.read(t)) >= 5 })
	holder, epoch := waitHolder(t, c1, j.ID, "")
	waiting := retryWaiting(t, c1, j.ID)

	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	ea.proxies[holder].Cut()
	// Down for longer than the lease TTL: the lease key expires.
	testutil.Eventually(t, 20*time.Second, "an outage of 3 lease TTLs", func() bool { return time.Since(down) > 3*failoverTTL })
	c2 := startCtl(t, cfg)
	next, newEpoch := waitHolder(t, c2, j.ID, holder)
	if v := unlabelledCounter(t, c2, "ax_lease_expiries_total"); v != 0 {
		t.Fatalf("the lease was taken over (%v expiries), not granted afresh after it expired", v)
	}
	outageFires := firstAttempts(ea.read(t), holder, epoch, down)
	t.Logf("controller down %s; %s (epoch %d) fired %d times meanwhile; %d retries waited; %s holds epoch %d",
		time.Since(down).Round(time.Millisecond), holder, epoch, len(outageFires), len(waiting), next, newEpoch)
	if len(outageFires) == 0 {
		t.Fatalf("%s did not fire while the controller was down: nothing to check", holder)
	}

	ea.proxies[holder].Heal()
	got := waitAllSucceed(t, c2, append(slices.Clone(outageFires), waiting...), "fired in the outage or waiting through it")
	for _, id := range outageFires {
		if e := got[id]; e.Agent != next {
			t.Errorf("%s (fired by %s in the outage): retried on %s, want %s", id, holder, e.Agent, next)
		}
	}
	checkFencing(t, ea.read(t))
}

// TestLeaseEdgeRetryThroughOutage: one member only. Executions wait in
// RETRY_WAITING when the controller goes down for longer than lease_ttl;
// it comes back while the agent's link is still cut, and, once the link
// heals, grants the same agent a fresh epoch. The retries that fell due in
// the outage run there under the new epoch, and so do those of the fires
// made in the outage: none stays in RETRY_WAITING.
func TestLeaseEdgeRetryThroughOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns agent processes")
	}
	dir, port := t.TempDir(), testutil.FreePort(t)
	cfg := edgeCtlConfig(dir, port)
	c1 := startCtl(t, cfg)
	ea := startEdgeAgents(t, c1.NATSURL(), "pump-a")
	waitAgentOnline(t, c1, "pump-a")
	j := flakyPumpJob(t, c1, 2*time.Second)
	testutil.Eventually(t, 20*time.Second, "5 fires", func() bool { return len(ea.read(t)) >= 5 })
	_, epoch := waitHolder(t, c1, j.ID, "")
	waiting := retryWaiting(t, c1, j.ID)
	if len(waiting) == 0 {
		t.Fatal("no execution in RETRY_WAITING before the outage: nothing to check")
	}

	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	ea.proxies["pump-a"].Cut()
	testutil.Eventually(t, 20*time.Second, "an outage of 3 lease TTLs", func() bool { return time.Since(down) > 3*failoverTTL })
	c2 := startCtl(t, cfg) // its retry timers are due at once; the agent is still cut off
	ea.proxies["pump-a"].Heal()
	holder, newEpoch := waitHolder(t, c2, j.ID, "")
	if holder != "pump-a" || newEpoch <= epoch {
		t.Fatalf("after the outage %s holds epoch %d, want pump-a above %d", holder, newEpoch, epoch)
	}
	outageFires := firstAttempts(ea.read(t), "pump-a", epoch, down)
	// Those whose retry had not run before the controller went down.
	before := ea.read(t)
	through := slices.DeleteFunc(slices.Clone(waiting), func(id string) bool {
		return slices.ContainsFunc(before, func(f groupFire) bool { return f.execID == id && f.attempt >= 2 && f.at.Before(down) })
	})
	t.Logf("%d executions waited in RETRY_WAITING through the outage (%d of them with no retry run before it), %d fires in it; epoch %d → %d",
		len(waiting), len(through), len(outageFires), epoch, newEpoch)
	if len(through) == 0 {
		t.Fatal("every retry ran before the outage: nothing to check")
	}
	got := waitAllSucceed(t, c2, append(slices.Clone(waiting), outageFires...), "retries due in the outage")
	for _, id := range through {
		if e := got[id]; e.Epoch != newEpoch {
			t.Errorf("%s: retried under epoch %d, want the new epoch %d", id, e.Epoch, newEpoch)
		}
	}
	checkFencing(t, ea.read(t))
}

// unlabelledCounter returns the value of a counter without labels.
func unlabelledCounter(t *testing.T, c *controller.Controller, name string) float64 {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// retryWaiting returns the executions of jobID in RETRY_WAITING now.
func retryWaiting(t *testing.T, c *controller.Controller, jobID string) []string {
	t.Helper()
	var out []string
	for _, e := range execs(t, c, jobID) {
		if e.State == protocol.StateRetryWaiting {
			out = append(out, e.ExecID)
		}
	}
	return out
}
