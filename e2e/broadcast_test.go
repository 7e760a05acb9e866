package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// runLog records the tasks a handler ran, per agent.
type runLog struct {
	mu   sync.Mutex
	runs map[string][]agent.Task
}

func (l *runLog) handler(agentID string) agent.HandlerFunc {
	return func(_ context.Context, t agent.Task) agent.Result {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs[agentID] = append(l.runs[agentID], t)
		return agent.Result{}
	}
}

func (l *runLog) of(agentID string) []agent.Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Task(nil), l.runs[agentID]...)
}

// TestBroadcastGroupJob: a mode-all job of group site=plant-3 runs on both
// members at every fire with distinct shard slots and broadcast exec ids;
// an agent outside the group never runs it.
func TestBroadcastGroupJob(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	ev := watchEvents(t, c.NATSURL())
	log := &runLog{runs: map[string][]agent.Task{}}
	for _, a := range []struct{ id, site string }{{"plant3-a", "plant-3"}, {"plant3-b", "plant-3"}, {"plant4-a", "plant-4"}} {
		cfg := agentConfig(a.id, c.NATSURL(), t.TempDir(), map[string]string{"site": a.site})
		startAgent(t, cfg, agent.WithHandler("valve", log.handler(a.id)))
		waitAgentOnline(t, c, a.id)
	}
	j := createJob(t, c, protocol.Job{Name: "valves", Handler: "valve", Schedule: schedule.Spec{Every: "300ms"},
		Target: protocol.Target{Group: "site=plant-3", Mode: protocol.ModeAll}})

	// fires groups the job's executions by scheduled time.
	fires := func(es []protocol.Execution) (map[time.Time][]protocol.Execution, []time.Time) {
		m := map[time.Time][]protocol.Execution{}
		for _, e := range es {
			m[e.ScheduledAt] = append(m[e.ScheduledAt], e)
		}
		var keys []time.Time
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, k int) bool { return keys[i].Before(keys[k]) })
		return m, keys
	}
	var all []protocol.Execution
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "3 fires done on both agents: " + summarize(all) }, func() bool {
		all = execs(t, c, j.ID)
		m, keys := fires(all)
		done := 0
		for _, k := range keys {
			if n := len(m[k]); n == 2 && m[k][0].State == protocol.StateSuccess && m[k][1].State == protocol.StateSuccess {
				done++
			}
		}
		return done >= 3
	})
	if err := c.DeleteJob(testutil.Context(t, 80*time.Second), j.ID); err != nil {
		t.Fatalf("DeleteJob: %v", err)
	}

	m, keys := fires(all)
	for i, k := range keys {
		es := m[k]
		if i == len(keys)-1 && len(es) < 2 {
			continue // the last fire may still be on its way
		}
		if len(es) != 2 {
			t.Errorf("fire %d of %d (%v): %d executions %s, want one per group member", i+1, len(keys), k, len(es), summarize(es))
			continue
		}
		agents, slots := map[string]bool{}, map[int]bool{}
		for _, e := range es {
			agents[e.Agent] = true
			if e.Shard == nil || e.Shard.Total != 2 {
				t.Errorf("%s: shard %+v, want total 2", e.ExecID, e.Shard)
				continue
			}
			slots[e.Shard.Index] = true
			if want := protocol.BroadcastExecID(j.ID, k, e.Shard.Index); e.ExecID != want {
				t.Errorf("exec id %s, want %s", e.ExecID, want)
			}
		}
		if !agents["plant3-a"] || !agents["plant3-b"] || len(slots) != 2 {
			t.Errorf("fire %v ran on %v with slots %v, want both plant-3 agents with slots 0 and 1", k, agents, slots)
		}
		for _, e := range es {
			if e.State == protocol.StateSuccess {
				ev.Wait(t, e.ExecID, protocol.StateSuccess)
			}
		}
	}
	// The handlers saw the same slots as the controller.
	for _, id := range []string{"plant3-a", "plant3-b"} {
		runs := log.of(id)
		if len(runs) < 3 {
			t.Errorf("%s ran %d times, want ≥ 3", id, len(runs))
		}
		for _, r := range runs {
			if r.Shard == nil || r.Shard.Total != 2 || r.ExecID != protocol.BroadcastExecID(j.ID, r.ScheduledAt, r.Shard.Index) {
				t.Errorf("%s ran %s with shard %+v", id, r.ExecID, r.Shard)
			}
		}
	}
	if runs := log.of("plant4-a"); len(runs) != 0 {
		t.Errorf("plant4-a is not in the group but ran %d times: %v", len(runs), fmt.Sprint(runs[0].ExecID))
	}
	for _, e := range all {
		if e.Agent == "plant4-a" {
			t.Errorf("execution %s on plant4-a", e.ExecID)
		}
	}
}
