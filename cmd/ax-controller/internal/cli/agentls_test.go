package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/agenttest"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// leaseServer runs a real controller (embedded NATS, heartbeats every
// 200ms) behind the API handler; it returns the API URL and the NATS URL.
func leaseServer(t *testing.T) (apiURL, natsURL string) {
	t.Helper()
	cfg := apitest.Config(t)
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 2 * time.Second
	cfg.Logger = testutil.Logger().With("who", "controller")
	srv, ctrl := apitest.Serve(t, cfg)
	return srv.URL, ctrl.NATSURL()
}

// runAgent runs a real agent (SQLite store in a temp dir) with a no-op Go
// handler "record" until the test ends.
func runAgent(t *testing.T, id, natsURL string, labels map[string]string) {
	t.Helper()
	cfg := agenttest.Config(id, natsURL, t.TempDir())
	cfg.Labels = labels
	agenttest.Start(t, cfg, agent.WithHandler("record", func(context.Context, agent.Task) agent.Result { return agent.Result{} }))
}

// TestAgentLsShowsLeases: with a group job leased to one of two real agents
// of its group, `agent ls -o json` lists the lease (job id and epoch, as
// the controller holds it in ax_leases) on the holder only, and the table's
// LEASES column shows "<job id>@<epoch>" on the holder's row and "-" on the
// other member's.
func TestAgentLsShowsLeases(t *testing.T) {
	ctx := context.Background()
	apiURL, natsURL := leaseServer(t)
	for _, id := range []string{"pump-a", "pump-b"} {
		runAgent(t, id, natsURL, map[string]string{"role": "pump"})
	}
	job := writeFile(t, "pump.yaml", "name: pump\nhandler: record\nschedule: {every: 1s}\ntarget: {group: \"role=pump\", mode: any}\n")
	if code, _, e := run(ctx, "job", "apply", "--api", apiURL, "-f", job); code != 0 {
		t.Fatalf("apply: %s", e)
	}
	code, out, e := run(ctx, "job", "ls", "--api", apiURL, "-o", "json")
	var jobs []protocol.Job
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 {
		t.Fatalf("job ls: %d %s %s", code, out, e)
	}
	jobID := jobs[0].ID

	// -o json: wait until exactly one member holds the lease.
	var agents []protocol.AgentInfo
	var holder, other protocol.AgentInfo
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "one agent holding the lease in agent ls -o json: " + out }, func() bool {
		code, out, _ = run(ctx, "agent", "ls", "--api", apiURL, "-o", "json")
		agents = nil
		if code != 0 || json.Unmarshal([]byte(out), &agents) != nil || len(agents) != 2 {
			return false
		}
		var holders []protocol.AgentInfo
		for _, a := range agents {
			if len(a.Leases) > 0 {
				holders = append(holders, a)
			} else {
				other = a
			}
		}
		if len(holders) != 1 {
			return false
		}
		holder = holders[0]
		return true
	})
	if len(holder.Leases) != 1 || holder.Leases[0].JobID != jobID || holder.Leases[0].Epoch == 0 {
		t.Fatalf("holder %s leases %+v, want one lease of %s with an epoch", holder.Agent, holder.Leases, jobID)
	}
	if !strings.Contains(out, `"leases"`) || !strings.Contains(out, `"epoch"`) {
		t.Errorf("-o json does not name the leases and their epoch:\n%s", out)
	}

	// Table: the LEASES cell of each row.
	code, out, e = run(ctx, "agent", "ls", "--api", apiURL)
	if code != 0 {
		t.Fatalf("agent ls: %d %s", code, e)
	}
	cells := column(t, out, "LEASES")
	want := map[string]string{holder.Agent: fmt.Sprintf("%s@%d", jobID, holder.Leases[0].Epoch), other.Agent: "-"}
	for agentID, w := range want {
		if cells[agentID] != w {
			t.Errorf("LEASES of %s = %q, want %q\n%s", agentID, cells[agentID], w, out)
		}
	}
}

// column returns, per row of an aligned table, the cell under header col
// (keyed by the row's first cell). Cells under col hold no spaces.
func column(t *testing.T, table, col string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	at := strings.Index(lines[0], col)
	if at < 0 {
		t.Fatalf("no %s column:\n%s", col, table)
	}
	out := map[string]string{}
	for _, l := range lines[1:] {
		if len(l) <= at {
			t.Fatalf("row %q ends before the %s column", l, col)
		}
		out[strings.Fields(l)[0]] = strings.Fields(l[at:])[0]
	}
	return out
}

// TestLeasesText: the LEASES cell lists job@epoch in order; when the list
// does not fit in a cell it stays one cell of at most maxCell runes with
// the first leases and the count of the others ("+N").
func TestLeasesText(t *testing.T) {
	lease := func(i int) protocol.HeldLease {
		return protocol.HeldLease{JobID: fmt.Sprintf("ax-t1-20261129120000-%06d", i), Epoch: uint64(i + 1)}
	}
	if got := leasesText(nil); got != "" {
		t.Errorf("no leases: %q, want empty (shown as -)", got)
	}
	two := []protocol.HeldLease{lease(1), lease(2)}
	if got, want := leasesText(two), "ax-t1-20261129120000-000001@2,ax-t1-20261129120000-000002@3"; got != want {
		t.Errorf("two leases: %q, want %q", got, want)
	}
	var many []protocol.HeldLease
	for i := range 7 {
		many = append(many, lease(i))
	}
	got := leasesText(many)
	if want := "ax-t1-20261129120000-000000@1,ax-t1-20261129120000-000001@2,+5"; got != want {
		t.Errorf("seven leases: %q, want %q", got, want)
	}
	if n := utf8.RuneCountInString(got); n > maxCell {
		t.Errorf("seven leases: %d runes, more than %d", n, maxCell)
	}
	long := []protocol.HeldLease{{JobID: "ax-" + strings.Repeat("n", 64) + "-20261129120000-aaaaaa", Epoch: 1}, lease(1)}
	if got := leasesText(long); got != "+2" {
		t.Errorf("first lease longer than a cell: %q, want +2", got)
	}
	var b bytes.Buffer
	if err := printAgents(&b, "table", []protocol.AgentInfo{{Agent: "edge-7", Leases: many}, {Agent: "edge-8"}}); err != nil {
		t.Fatal(err)
	}
	cells := column(t, b.String(), "LEASES")
	if cells["edge-7"] != got || cells["edge-8"] != "-" {
		t.Errorf("table cells %q, want %q and -\n%s", cells, got, b.String())
	}
}
