package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// fireLog records every run of a group job: which agent ran which exec id
// under which epoch, and when.
type fireLog struct {
	mu    sync.Mutex
	fires []groupFire
}

type groupFire struct {
	agent   string
	execID  string
	attempt int
	epoch   uint64
	at      time.Time
}

func (l *fireLog) handler(agentID string) agent.HandlerFunc {
	return func(_ context.Context, t agent.Task) agent.Result {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.fires = append(l.fires, groupFire{agent: agentID, execID: t.ExecID, attempt: t.Attempt, epoch: t.Epoch, at: time.Now()})
		return agent.Result{}
	}
}

func (l *fireLog) snapshot() []groupFire {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fires)
}

// checkFencing asserts the lease invariants over a run: no two agents ever
// fired inside the same epoch, and no (exec id, attempt) ran twice.
func checkFencing(tb testing.TB, fires []groupFire) {
	tb.Helper()
	byEpoch := map[uint64]string{}
	runs := map[string]string{}
	for _, f := range fires {
		if f.epoch == 0 {
			tb.Errorf("%s ran %s without an epoch", f.agent, f.execID)
		}
		if a, ok := byEpoch[f.epoch]; ok && a != f.agent {
			tb.Errorf("epoch %d fired on %s and %s", f.epoch, a, f.agent)
		}
		byEpoch[f.epoch] = f.agent
		k := fmt.Sprintf("%s/%d", f.execID, f.attempt)
		if a, ok := runs[k]; ok {
			tb.Errorf("%s ran on %s and again on %s", k, a, f.agent)
		}
		runs[k] = f.agent
	}
}

// TestGroupLeaseFailoverInProcess: three agents in a group, a group job
// every 200ms: one holder fires it; stopping the holder moves the lease
// to another member (epoch+1) within the lease TTL plus a second, and the
// fencing invariants hold throughout.
func TestGroupLeaseFailoverInProcess(t *testing.T) {
	cfg := ctlConfig(t.TempDir(), -1)
	cfg.LeaseTTL = 1500 * time.Millisecond
	cfg.LeaseRenewInterval = 300 * time.Millisecond
	c := startCtl(t, cfg)
	log := &fireLog{}
	agents := map[string]*runningAgent{}
	for _, id := range []string{"pump-a", "pump-b", "pump-c"} {
		acfg := agentConfig(id, c.NATSURL(), t.TempDir(), map[string]string{"role": "pump"})
		agents[id] = startAgent(t, acfg, agent.WithHandler("record", log.handler(id)))
		waitAgentOnline(t, c, id)
	}
	j := createJob(t, c, protocol.Job{Name: "pump", Handler: "record", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Group: "role=pump"}})
	_ = j
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "first fires" }, func() bool { return len(log.snapshot()) >= 5 })
	first := log.snapshot()
	holder := first[len(first)-1].agent
	agentsNow, _ := c.ListAgents(context.Background())
	found := false
	for _, a := range agentsNow {
		if a.Agent == holder && len(a.Leases) == 1 && a.Leases[0].JobID == j.ID {
			found = true
		}
	}
	if !found {
		t.Fatalf("agent ls does not show %s holding %s: %+v", holder, j.ID, agentsNow)
	}
	stopped := time.Now()
	agents[holder].stop(t)
	var next groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "a new holder fires" }, func() bool {
		for _, f := range log.snapshot() {
			if f.agent != holder && f.at.After(stopped) {
				next = f
				return true
			}
		}
		return false
	})
	took := next.at.Sub(stopped)
	t.Logf("holder %s stopped; %s fired %s later (epoch %d)", holder, next.agent, took, next.epoch)
	if took > cfg.LeaseTTL+time.Second {
		t.Errorf("failover took %s, budget %s", took, cfg.LeaseTTL+time.Second)
	}
	checkFencing(t, log.snapshot())
	_ = controller.Config{}
}
