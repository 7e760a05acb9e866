package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
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

// TestGroupLeaseHandedBackOnCleanStop: a holder that stops cleanly (a
// restart for an upgrade) stops firing, then hands its lease back in a
// last heartbeat: another member fires the job long before the lease TTL
// (30s here) would have run out, with a higher epoch, and the hand-over is
// not counted as a takeover.
func TestGroupLeaseHandedBackOnCleanStop(t *testing.T) {
	cfg := ctlConfig(t.TempDir(), -1)
	cfg.LeaseTTL = 30 * time.Second
	c := startCtl(t, cfg)
	log := &fireLog{}
	agents := map[string]*runningAgent{}
	for _, id := range []string{"fan-a", "fan-b"} {
		acfg := agentConfig(id, c.NATSURL(), t.TempDir(), map[string]string{"role": "fan"})
		agents[id] = startAgent(t, acfg, agent.WithHandler("record", log.handler(id)))
		waitAgentOnline(t, c, id)
	}
	createJob(t, c, protocol.Job{Name: "fan", Handler: "record", Schedule: schedule.Spec{Every: "200ms"},
		Target: protocol.Target{Group: "role=fan"}})
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "first fires" }, func() bool { return len(log.snapshot()) >= 3 })
	first := log.snapshot()
	holder, epoch := first[len(first)-1].agent, first[len(first)-1].epoch

	stopped := time.Now()
	agents[holder].Stop(t)
	lastOld := time.Time{}
	for _, f := range log.snapshot() {
		if f.agent == holder && f.at.After(lastOld) {
			lastOld = f.at
		}
	}
	var next groupFire
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "another member fires" }, func() bool {
		for _, f := range log.snapshot() {
			if f.agent != holder {
				next = f
				return true
			}
		}
		return false
	})
	t.Logf("holder %s stopped cleanly; %s fired %s later (epoch %d → %d)", holder, next.agent, next.at.Sub(stopped), epoch, next.epoch)
	if next.at.Sub(stopped) >= cfg.LeaseTTL {
		t.Fatalf("the job moved %s after a clean stop: not handed back (lease TTL %s)", next.at.Sub(stopped), cfg.LeaseTTL)
	}
	if next.epoch <= epoch {
		t.Fatalf("new holder fired at epoch %d, not above %d", next.epoch, epoch)
	}
	if !next.at.After(lastOld) {
		t.Fatalf("new holder fired at %s, before the old holder's last fire at %s", next.at, lastOld)
	}
	checkFencing(t, log.snapshot())
	if v := counter(t, c, "ax_lease_takeovers_total", "kind", "group"); v != 0 {
		t.Fatalf("a clean hand-over was counted as %v group takeovers", v)
	}
}
