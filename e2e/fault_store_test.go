package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// triggerTimes stops the agents (the cluster is quiet: nothing is left
// to do) and reads from each agent's own SQLite store when it triggered
// each attempt of jobs, on its own clock: agent → "exec_id/attempt" →
// triggered_at. The controller's records carry these times shifted by the
// agent's estimate of its clock offset (reports are on controller time),
// which is off by as much as a delayed heartbeat reply, so checkForbid
// reads the agent's own.
func (c *faultCluster) triggerTimes(ctx context.Context, jobs []string) (map[string]map[string]time.Time, error) {
	out := map[string]map[string]time.Time{}
	for _, a := range c.agents {
		if a.proc != nil {
			c.killAgent(a)
		}
		st, err := store.Open(ctx, filepath.Join(a.dir, "agent.db"), store.Options{})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.id, err)
		}
		out[a.id] = map[string]time.Time{}
		for _, id := range jobs {
			es, err := st.JobExecs(ctx, id, 1<<20)
			if err != nil {
				_ = st.Close()
				return nil, fmt.Errorf("agent %s: %w", a.id, err)
			}
			for _, e := range es {
				if !e.TriggeredAt.IsZero() {
					out[a.id][fmt.Sprintf("%s/%d", e.ExecID, e.Attempt)] = e.TriggeredAt
				}
			}
		}
		if err := st.Close(); err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.id, err)
		}
	}
	return out, nil
}

// offsetErrors is, per agent, the largest difference between the
// triggered_at of a record (controller time, as the agent reported it)
// and the agent's own: on one host the true offset is zero.
func offsetErrors(execs []protocol.Execution, triggers map[string]map[string]time.Time) string {
	worst := map[string]time.Duration{}
	for _, e := range execs {
		local, ok := triggers[e.Agent][fmt.Sprintf("%s/%d", e.ExecID, e.Attempt)]
		if !ok || e.TriggeredAt.IsZero() {
			continue
		}
		d := e.TriggeredAt.Sub(local)
		if d < 0 {
			d = -d
		}
		worst[e.Agent] = max(worst[e.Agent], d)
	}
	var s []string
	for _, a := range slices.Sorted(maps.Keys(worst)) {
		s = append(s, fmt.Sprintf("%s %s", a, worst[a].Round(time.Millisecond)))
	}
	return "largest |triggered_at in the record − the agent's own| (clock offset applied to reports; one host): " + strings.Join(s, ", ")
}
