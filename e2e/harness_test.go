package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/agenttest"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// ctlConfig is a controller config for an embedded server on port with its
// store in dir (port -1: random).
func ctlConfig(dir string, port int) controller.Config {
	cfg := controller.DefaultConfig()
	cfg.DataDir = dir
	cfg.NATS.Port = port
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 2 * time.Second
	cfg.Logger = testutil.Logger().With("who", "controller")
	return cfg
}

// startCtl starts a controller; it is closed when the test ends (Close
// twice is harmless).
func startCtl(tb testing.TB, cfg controller.Config) *controller.Controller {
	tb.Helper()
	c := apitest.Start(tb, cfg)
	return c
}

// runningAgent is a real agent running in the background.
type runningAgent = agenttest.Running

// agentConfig is an agent config for the NATS server at url with its
// SQLite store in dir.
func agentConfig(id, url, dir string, labels map[string]string) agent.Config {
	cfg := agenttest.Config(id, url, dir)
	cfg.Labels = labels
	cfg.Log.Level = "debug"
	cfg.Log.Format = "text"
	return cfg
}

// startAgent builds and runs an agent with cfg; it is stopped when the test
// ends.
func startAgent(tb testing.TB, cfg agent.Config, opts ...agent.Option) *runningAgent {
	tb.Helper()
	return agenttest.Start(tb, cfg, opts...)
}

// waitAgentOnline waits until the controller lists the agent online.
func waitAgentOnline(tb testing.TB, c *controller.Controller, id string) {
	tb.Helper()
	testutil.EventuallyFunc(tb, 20*time.Second, func() string { return "agent " + id + " online" }, func() bool {
		as, err := c.ListAgents(context.Background())
		if err != nil {
			return false
		}
		return slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == id && a.Online })
	})
}

// createJob creates j and fails the test on error.
func createJob(tb testing.TB, c *controller.Controller, j protocol.Job) protocol.Job {
	tb.Helper()
	got, err := c.CreateJob(testutil.Context(tb, 80*time.Second), j)
	if err != nil {
		tb.Fatalf("CreateJob(%s): %v", j.Name, err)
	}
	return got
}

// execs lists every execution of jobID.
func execs(tb testing.TB, c *controller.Controller, jobID string) []protocol.Execution {
	tb.Helper()
	var all []protocol.Execution
	f := controller.ExecFilter{JobID: jobID, Limit: 1000}
	for {
		page, next, err := c.ListExecutions(context.Background(), f)
		if err != nil {
			tb.Fatalf("ListExecutions: %v", err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		f.After = next
	}
}

// waitExecs waits until at least n executions of jobID satisfy pred and
// returns them.
func waitExecs(tb testing.TB, c *controller.Controller, jobID string, n int, what string, pred func(protocol.Execution) bool) []protocol.Execution {
	tb.Helper()
	var got, last []protocol.Execution
	testutil.EventuallyFunc(tb, 30*time.Second, func() string {
		return fmt.Sprintf("%d executions of %s %s; have %d: %s", n, jobID, what, len(got), summarize(last))
	}, func() bool {
		last = execs(tb, c, jobID)
		got = got[:0]
		for _, e := range last {
			if pred(e) {
				got = append(got, e)
			}
		}
		return len(got) >= n
	})
	return got
}

// waitExec polls one execution until pred holds.
func waitExec(tb testing.TB, c *controller.Controller, execID, what string, pred func(protocol.Execution) bool) protocol.Execution {
	tb.Helper()
	var last protocol.Execution
	var lastErr error
	testutil.EventuallyFunc(tb, 30*time.Second, func() string {
		return fmt.Sprintf("%s %s; last %+v (err %v)", execID, what, last, lastErr)
	}, func() bool {
		last, lastErr = c.GetExecution(context.Background(), execID)
		return lastErr == nil && pred(last)
	})
	return last
}

func inState(s protocol.State) func(protocol.Execution) bool {
	return func(e protocol.Execution) bool { return e.State == s }
}

func summarize(es []protocol.Execution) string {
	s := ""
	for i, e := range es {
		if i == 8 {
			return s + fmt.Sprintf(" …(+%d)", len(es)-i)
		}
		s += fmt.Sprintf(" [%s a%d %s %s]", e.ExecID[len(e.ExecID)-6:], e.Attempt, e.State, e.Reason)
	}
	return s
}

// events records every event on AX_EVT seen by a plain NATS core
// subscription (ax.evt.>), as a client of the controller's server would.
type events = natstest.Events

// watchEvents starts recording events on the server at url.
func watchEvents(tb testing.TB, url string) *events { return natstest.WatchEvents(tb, url) }

// states returns the To states of es.
func states(es []protocol.Event) []protocol.State { return natstest.States(es) }

// mustJSON marshals v.
func mustJSON(tb testing.TB, v any) json.RawMessage {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
