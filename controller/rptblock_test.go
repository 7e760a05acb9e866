package controller

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// lastBlockIndex returns the index of the newest message block file of
// the embedded server's stream in the controller's data dir.
func lastBlockIndex(t *testing.T, dataDir, stream string) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataDir, "jetstream", "$G", "streams", stream, "msgs"))
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".blk")); err == nil && strings.HasSuffix(e.Name(), ".blk") {
			last = max(last, n)
		}
	}
	return last
}

// TestReportAcksKeepTheLastBlock: reports that come one at a time (each
// applied before the next is sent) do not each cost AX_RPT a new block
// file. The file store replaces the stream's last block whenever a
// removal empties it; acknowledging every applied report at once emptied
// the work queue after each attempt's reports, so the block index rose
// with every attempt (20 new blocks here). The ack keeper
// (ingest/ackkeep.go) holds back the acknowledgement of the report
// applied last until the next is applied; with none after it, until its
// hold ends, so the queue still drains.
func TestReportAcksKeepTheLastBlock(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	// No redelivery within the test: only the hold's end acknowledges the
	// last report.
	cfg.AckWait = time.Minute
	c := startController(t, cfg)
	a := newTestAgent(t, c.NATSURL(), "edge-blk", nil).start()
	ctx := tctx(t)
	const runs = 20
	before := lastBlockIndex(t, cfg.DataDir, protocol.StreamReports)
	for range runs {
		j, err := c.CreateJob(ctx, asapJob(a.id))
		if err != nil {
			t.Fatal(err)
		}
		cmd := a.waitCommand("run of "+j.ID, func(cmd protocol.Command) bool {
			return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == j.ID
		})
		a.runAttempt(j.ID, cmd.Run.ExecID, 1, cmd.Run.RunAt, retry.OutcomeSuccess, ok)
		eventually(t, 20*time.Second, cmd.Run.ExecID+" SUCCESS", func() bool {
			e, err := c.GetExecution(ctx, cmd.Run.ExecID)
			return err == nil && e.State == protocol.StateSuccess
		})
	}
	made := lastBlockIndex(t, cfg.DataDir, protocol.StreamReports) - before
	t.Logf("%d reports one attempt at a time: %d new AX_RPT blocks", 3*runs, made)
	if made > runs/4 {
		t.Fatalf("AX_RPT made %d new blocks for %d attempts applied one at a time, want at most %d", made, runs, runs/4)
	}
	// With no report after it, the last one's acknowledgement goes once
	// its hold (at most 250 ms) has passed: the work queue drains.
	st, err := a.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "AX_RPT empty after the last report's hold", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}
