package e2e

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// quiesce waits until the cluster is quiet (see TestFaultInjection) and
// returns what the reconciliation reads, events left out. It runs as the
// subtest "quiesce": when the cluster does not get quiet in time, that
// subtest fails with the reason and the caller still reconciles what was
// seen last (why says why it is not quiet).
func (c *faultCluster) quiesce(jobs map[string]faultJob, oneShots []faultJob, runLog string) (d faultData, why string) {
	c.t.Helper()
	d = faultData{jobs: jobs, oneShots: oneShots, kills: map[string][]time.Time{}, stalls: map[string][]time.Time{}}
	for _, a := range c.agents {
		d.kills[a.id] = a.kills
	}
	for _, ctl := range c.ctls {
		d.stalls[ctl.node] = ctl.stalls
	}
	since := time.Now()
	var fp string
	var firstQuiet, lastCheck time.Time
	c.t.Run("quiesce", func(t *testing.T) {
		testutil.EventuallyFunc(t, faultQuiesceTimeout, func() string { return "a quiet cluster: " + why }, func() bool {
			if time.Since(lastCheck) < 250*time.Millisecond {
				return false
			}
			lastCheck = time.Now()
			heartbeatsAfter := since
			if !firstQuiet.IsZero() {
				heartbeatsAfter = firstQuiet
			}
			now := time.Now()
			var f string
			f, why = c.quiet(t, &d, runLog, heartbeatsAfter)
			switch {
			case why != "":
				firstQuiet = time.Time{}
				return false
			case firstQuiet.IsZero() || f != fp:
				firstQuiet, fp = now, f
				return false
			}
			return now.Sub(firstQuiet) >= time.Second
		})
	})
	if why == "" {
		c.note("quiet")
	} else {
		c.note("not quiet after %s: %s", faultQuiesceTimeout, why)
	}
	return d, why
}

// quiet reads executions and runs into d and says why the cluster is not
// quiet ("" when it is; every reason, "; "-separated), with a fingerprint
// of what it read. Executions are read first: the run of an attempt a
// record shows is in the run log by then.
func (c *faultCluster) quiet(tb testing.TB, d *faultData, runLog string, heartbeatsAfter time.Time) (fingerprint, why string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	execs, err := c.api.AllExecutions(ctx, client.ExecFilter{Limit: 1000}, 0)
	if err != nil {
		return "", fmt.Sprintf("list executions: %v", err)
	}
	runs, err := readRuns(runLog)
	if err != nil {
		tb.Fatal(err)
	}
	d.execs, d.runs = execs, runs
	var whys []string
	h := fnv.New64a()
	ended := 0
	for _, r := range runs {
		if !r.end.IsZero() {
			ended++
		} else if c.killedAfter(r.agent, r.start).IsZero() {
			whys = append(whys, fmt.Sprintf("run still going: %s", r))
		}
	}
	fmt.Fprintf(h, "%d|%d|", len(runs), ended)
	has := map[string]bool{}
	var open []protocol.Execution
	for _, e := range execs {
		fmt.Fprintf(h, "%s %d %s|", e.ExecID, e.Attempt, e.State)
		has[e.JobID] = true
		if !e.State.Terminal() {
			open = append(open, e)
		}
	}
	fingerprint = fmt.Sprintf("%x", h.Sum64())
	for _, j := range d.oneShots {
		if !has[j.ID] {
			whys = append(whys, fmt.Sprintf("one-shot job %s (%s) has no execution yet", j.ID, j.Name))
		}
	}
	if len(open) > 0 {
		whys = append(whys, fmt.Sprintf("%d executions not terminal:%s", len(open), summarize(open)))
	}
	if agents, err := c.api.ListAgents(ctx); err != nil {
		whys = append(whys, fmt.Sprintf("list agents: %v", err))
	} else {
		seen := map[string]protocol.AgentInfo{}
		for _, a := range agents {
			seen[a.Agent] = a
		}
		for _, fa := range c.agents {
			a, ok := seen[fa.id]
			switch {
			case !ok || !a.Online:
				whys = append(whys, fmt.Sprintf("agent %s not online", fa.id))
			case !a.HeartbeatAt.After(heartbeatsAfter):
				whys = append(whys, fmt.Sprintf("agent %s: no heartbeat since %s", fa.id, fmtTime(heartbeatsAfter)))
			case a.Stats.OutboxDepth > 0 || a.Stats.QueueDepth > 0 || a.Stats.Running > 0:
				whys = append(whys, fmt.Sprintf("agent %s: outbox %d, ready queue %d, running %d", fa.id,
					a.Stats.OutboxDepth, a.Stats.QueueDepth, a.Stats.Running))
			}
		}
	}
	if n, first, err := c.reportsWaiting(ctx); err != nil {
		whys = append(whys, fmt.Sprintf("AX_RPT: %v", err))
	} else if n > 0 {
		whys = append(whys, fmt.Sprintf("%d reports waiting in AX_RPT: %s", n, first))
	}
	return fingerprint, strings.Join(whys, "; ")
}

// rejectedReports are each controller's ax_reports_rejected_total
// counters (since its last start), for the report.
func (c *faultCluster) rejectedReports() []string {
	var lines []string
	for _, ctl := range c.ctls {
		lines = append(lines, fmt.Sprintf("reports rejected by %s since its last start: %s", ctl.node, rejectedOf(ctl.apiAddr)))
	}
	return lines
}

// rejectedOf reads the ax_reports_rejected_total counters of the
// controller whose API is at addr.
func rejectedOf(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "ax_reports_rejected_total{") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
