package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestAgentDiskFull: the disk under an agent's store fills up (an SD card
// full of logs). The disk is a real tmpfs of 4 MiB, so the test needs
// Linux, root and mount, and skips without them.
//
// The agent process stops with a disk-full error (the trigger it could
// not record is not run); started again while the disk is still full it
// refuses to start; once space is freed it starts on the same store and
// its job fires again. The handler's own log of runs is then reconciled
// with the controller's records: no run twice, every run recorded (SUCCESS,
// or FAILED interrupted when its result could not be stored), and every
// SUCCESS backed by a run.
func TestAgentDiskFull(t *testing.T) {
	disk := testutil.SmallDisk(t, "4m")

	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	const id = "edge-sd"
	store := filepath.Join(disk, "agent")
	fires := filepath.Join(t.TempDir(), "fires") // the handler's log, on another disk
	p := startAgentProcIn(t, id, c.NATSURL(), "", fires, store, 0)
	waitAgentOnline(t, c, id)
	job := createJob(t, c, protocol.Job{Name: "tick", Handler: "record",
		Schedule: schedule.Spec{Every: "250ms"}, Target: protocol.Target{Agent: id}})
	waitExecs(t, c, job.ID, 3, "SUCCESS before the disk fills", inState(protocol.StateSuccess))

	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	waitExit(t, p.Child, 60*time.Second, "the agent on a full disk")
	if code, line := p.ExitCode(), p.ErrorLine(); code != 2 || !strings.Contains(line, "disk full") {
		t.Fatalf("agent on a full disk: exit code %d, error %q; want 2 and a disk-full error", code, line)
	}

	q, line := tryStartAgentProcIn(t, id, c.NATSURL(), "", fires, store, 0)
	waitExit(t, q.Child, 60*time.Second, "an agent started on a full disk")
	if code := q.ExitCode(); code != 2 || !strings.Contains(line, "disk full") {
		t.Fatalf("agent started on a full disk: exit code %d, error %q; want 2 and a disk-full error", code, line)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	startAgentProcIn(t, id, c.NATSURL(), "", fires, store, 0)
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return "a SUCCESS fired after the space was freed" }, func() bool {
		for _, e := range execs(t, c, job.ID) {
			if e.State == protocol.StateSuccess && e.ScheduledAt.After(restart) {
				return true
			}
		}
		return false
	})
	if err := c.DeleteJob(testutil.Context(t, 30*time.Second), job.ID); err != nil {
		t.Fatal(err)
	}
	// Every execution terminal, and every run in the handler's log
	// recorded: the last run's report may still be on its way when the
	// listed executions are all terminal.
	var all []protocol.Execution
	testutil.EventuallyFunc(t, 60*time.Second, func() string {
		return "every execution terminal and every run recorded: " + summarize(all)
	}, func() bool {
		all = execs(t, c, job.ID)
		listed := map[string]bool{}
		for _, e := range all {
			if !e.State.Terminal() {
				return false
			}
			listed[e.ExecID] = true
		}
		for _, f := range readFires(t, fires) {
			if !listed[f.execID] {
				return false
			}
		}
		return true
	})

	byID := map[string]protocol.Execution{}
	for _, e := range all {
		byID[e.ExecID] = e
	}
	ran := map[string]int{}
	for _, f := range readFires(t, fires) {
		k := f.execID + "#" + strconv.Itoa(f.attempt)
		if ran[k]++; ran[k] == 2 {
			t.Errorf("run %s ran twice", k)
		}
		e, ok := byID[f.execID]
		switch {
		case !ok:
			t.Errorf("run %s is not recorded", k)
		case e.Attempt < f.attempt:
			t.Errorf("run %s recorded at attempt %d", k, e.Attempt)
		case e.Attempt == f.attempt && e.State != protocol.StateSuccess &&
			!(e.State == protocol.StateFailed && e.Outcome == retry.OutcomeInterrupted):
			t.Errorf("run %s recorded %s (%s)", k, e.State, e.Outcome)
		}
	}
	t.Logf("%d runs in the handler's log, %d executions: %s", len(ran), len(all), summarize(all))
	for _, e := range all {
		if e.State == protocol.StateSuccess && ran[e.ExecID+"#"+strconv.Itoa(e.Attempt)] == 0 {
			t.Errorf("%s is SUCCESS at attempt %d, but its handler did not run", e.ExecID, e.Attempt)
		}
	}
}

// waitExit waits until the child process has exited.
func waitExit(t *testing.T, c *testutil.Child, within time.Duration, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(within):
		t.Fatalf("%s still running after %s", what, within)
	}
}
