package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestWipedStoreDoesNotRerun: an agent process finishes runs and stops;
// its agent.db is truncated to 0 bytes (its WAL removed) and it starts
// again on the same directory. It must not run again what the controller
// has recorded as finished (before the fix it read AX_CMD from sequence 1
// and re-ran them), and its periodic job must still be assigned to it.
func TestWipedStoreDoesNotRerun(t *testing.T) {
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	const id = "edge-w"
	dir := t.TempDir()
	fires := filepath.Join(t.TempDir(), "fires")
	p := startAgentProcIn(t, id, c.NATSURL(), "", fires, dir, 0)
	waitAgentOnline(t, c, id)

	var oneShots []protocol.Job
	for _, name := range []string{"once-a", "once-b", "once-c"} {
		oneShots = append(oneShots, createJob(t, c, protocol.Job{Name: name, Handler: "record",
			Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: id}}))
	}
	periodic := createJob(t, c, protocol.Job{Name: "tick", Handler: "record",
		Schedule: schedule.Spec{Every: "1s"}, Target: protocol.Target{Agent: id}})
	for _, j := range oneShots {
		waitExecs(t, c, j.ID, 1, "SUCCESS", inState(protocol.StateSuccess))
	}
	waitExecs(t, c, periodic.ID, 1, "a periodic fire in SUCCESS", inState(protocol.StateSuccess))

	p.kill()
	if err := os.Truncate(filepath.Join(dir, "agent.db"), 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"agent.db-wal", "agent.db-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	restart := time.Now()
	startAgentProcIn(t, id, c.NATSURL(), "", fires, dir, 0)

	// A run sent after the restart is applied after any replayed command:
	// once it has run, a replay would have run too.
	marker := createJob(t, c, protocol.Job{Name: "marker", Handler: "record",
		Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: id}})
	waitExecs(t, c, marker.ID, 1, "SUCCESS after the restart", inState(protocol.StateSuccess))
	// The periodic job is still assigned: it fires again after the restart.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "a periodic fire after the restart" }, func() bool {
		for _, e := range execs(t, c, periodic.ID) {
			if e.State == protocol.StateSuccess && e.ScheduledAt.After(restart) {
				return true
			}
		}
		return false
	})

	seen := map[string]int{}
	for _, f := range readFires(t, fires) {
		seen[f.execID+"#"+strconv.Itoa(f.attempt)]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("run %s ran %d times", k, n)
		}
	}
	for _, j := range oneShots {
		if es := execs(t, c, j.ID); len(es) != 1 || es[0].State != protocol.StateSuccess || es[0].Attempt != 1 {
			t.Errorf("%s: executions %s, want one SUCCESS at attempt 1", j.Name, summarize(es))
		}
	}
	if as, err := c.ListAgents(testutil.Context(t, 10*time.Second)); err != nil || len(as) != 1 || as[0].Cursor == 0 {
		t.Errorf("agent record after the restart: %+v, %v", as, err)
	}
}
