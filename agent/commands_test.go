package agent

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestCancelCommand: cancel ends a running attempt through its context
// and finishes a pending one before it runs; both report outcome
// cancelled, and the pending one never reaches its handler.
func TestCancelCommand(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-c", c.srv.URL())
	started := make(chan string, 4)
	var ran atomicCounter
	startAgent(t, cfg, WithHandler("block", func(ctx context.Context, tk Task) Result {
		ran.inc()
		started <- tk.ExecID
		<-ctx.Done()
		return Result{Code: 1, Message: "stopped"}
	}))
	j := newJob("edge-c", "block", schedule.Spec{Asap: true}, nil)

	tests := []struct {
		name    string
		runAt   time.Time
		running bool
	}{
		{"running", time.Now(), true},
		{"pending", time.Now().Add(time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runCmd(j, 1, tc.runAt)
			c.send("edge-c", run)
			if tc.running {
				select {
				case id := <-started:
					if id != run.Run.ExecID {
						t.Fatalf("started %s", id)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("handler did not start")
				}
			} // a pending run: commands apply in order, so the cancel finds it stored
			before := ran.get()
			c.send("edge-c", protocol.Command{Kind: protocol.CmdCancel, Cancel: &protocol.Cancel{ExecID: run.Run.ExecID, Reason: "operator"}})
			fin := waitFinished(t, c, 10*time.Second, run.Run.ExecID)
			if fin.Outcome != retry.OutcomeCancelled {
				t.Fatalf("outcome %s, want cancelled (%+v)", fin.Outcome, fin.Result)
			}
			if !tc.running && (ran.get() != before || fin.Result.Message != "cancelled before it ran: operator") {
				t.Fatalf("pending attempt: ran %d→%d, message %q", before, ran.get(), fin.Result.Message)
			}
		})
	}
}

// TestRunCommandStoredTwiceRunsOnce: AX_CMD keeps no de-duplication
// window to speak of (streams.CommandDuplicates), so a run command the
// controller sends again is stored again. The agent runs the attempt once
// and reports it finished once, whether the copy comes right after the
// first or after the attempt ended.
func TestRunCommandStoredTwiceRunsOnce(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-d", c.srv.URL())
	runs := map[string]*atomicCounter{}
	var mu sync.Mutex
	startAgent(t, cfg, WithHandler("count", func(ctx context.Context, tk Task) Result {
		mu.Lock()
		n := runs[tk.ExecID]
		if n == nil {
			n = &atomicCounter{}
			runs[tk.ExecID] = n
		}
		mu.Unlock()
		n.inc()
		return Result{Code: 0, Message: "ok"}
	}))
	ran := func(execID string) int64 {
		mu.Lock()
		defer mu.Unlock()
		if n := runs[execID]; n != nil {
			return n.get()
		}
		return 0
	}
	j := newJob("edge-d", "count", schedule.Spec{Asap: true}, nil)
	run := runCmd(j, 1, time.Now())
	c.send("edge-d", run)
	c.send("edge-d", run) // right behind the first
	waitFinished(t, c, 10*time.Second, run.Run.ExecID)
	c.send("edge-d", run) // after the attempt ended
	// Commands apply in order: once a later run has finished, the copies
	// before it were applied.
	marker := runCmd(newJob("edge-d", "count", schedule.Spec{Asap: true}, nil), 1, time.Now())
	c.send("edge-d", marker)
	waitFinished(t, c, 10*time.Second, marker.Run.ExecID)
	if n := ran(run.Run.ExecID); n != 1 {
		t.Errorf("the attempt ran %d times, want 1", n)
	}
	fins := 0
	for _, r := range c.reportsOf(run.Run.ExecID) {
		if r.Kind == protocol.ReportFinished {
			fins++
		}
	}
	if fins != 1 {
		t.Errorf("%d finished reports of the attempt, want 1", fins)
	}
}

// TestClockOffsetPersistedOnHeartbeat: the offset measured by heartbeats
// (not only at registration) is stored, so a restart starts from it.
func TestClockOffsetPersistedOnHeartbeat(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-o", c.srv.URL())
	a := startAgent(t, cfg)
	waitFor(t, 10*time.Second, "registration", func() bool { n, _ := c.heartbeats(); return n > 0 })
	c.skew.Store(int64(800 * time.Millisecond)) // after registration: only heartbeats see it
	waitFor(t, 10*time.Second, "offset stored", func() bool {
		v, ok, err := a.Store().Meta(context.Background(), store.MetaClockOffset)
		if err != nil || !ok {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		off := time.Duration(n)
		return err == nil && off > 600*time.Millisecond && off < time.Second
	})
}
