package controller

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestRestartResendsOnlyMissingRuns: after a restart the controller
// re-sends the run command of a PENDING execution only when AX_CMD does
// not hold it (its creation was cut short between the record and the
// command); the run of the other one, which its agent already holds, is
// not published again.
func TestRestartResendsOnlyMissingRuns(t *testing.T) {
	cfg, c1, a := onExternalServer(t, nil)
	ctx := tctx(t)
	var runs []*protocol.Run
	for range 2 {
		j, err := c1.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
			Target: protocol.Target{Agent: "edge-1"}})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, a.waitCommand("run", func(c protocol.Command) bool { return c.Kind == protocol.CmdRun && c.Run.Job.ID == j.ID }).Run)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	// The second run's command is lost, as if the controller had died
	// between its record and its command.
	deleteRunCommands(t, cfg.NATS.URL, runs[1].ExecID, 1)

	logs := &testutil.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	cfg.Registry = nil
	c2 := startController(t, cfg)
	reload := waitLogRecord(t, 20*time.Second, logs, "executions reloaded", func(rec map[string]any) bool { return rec["pending"] == float64(2) })
	if reload["pending_resent"] != float64(1) {
		t.Errorf("reload %v: want 1 of the 2 PENDING runs re-sent", reload)
	}
	if got := testutil.MetricValue(t, c2.m.commands.WithLabelValues(string(protocol.CmdRun))); got != 1 {
		t.Errorf("run commands published after the restart: %v, want 1 (only the lost one)", got)
	}
}

// deleteRunCommands deletes from AX_CMD the run commands of attempt of
// execID.
func deleteRunCommands(t *testing.T, url, execID string, attempt int) {
	t.Helper()
	ctx := tctx(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "run/" + execID + "/" + strconv.Itoa(attempt) + "/"
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err == nil && strings.HasPrefix(m.Header.Get(jetstream.MsgIDHeader), prefix) {
			if err := st.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no run command of %s attempt %d in %s", execID, attempt, protocol.StreamCommands)
	}
}
