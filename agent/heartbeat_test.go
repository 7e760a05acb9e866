package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/agent/scheduler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestHeartbeatNotBehindBacklog stalls the store's writer (a write that
// does not finish: a store far slower than the fires) while 7,000 runs
// fall due at once. The scheduler is then behind for as long as the stall
// lasts; heartbeats must still be sent and answered (the link does not
// wait for the scheduler), and the wheel fires waiting for the scheduler
// stay bounded (the wheels wait instead). Once the store writes again,
// every run runs: none is lost.
func TestHeartbeatNotBehindBacklog(t *testing.T) {
	const runs = 7000
	c := startCtl(t)
	c.consumer.Stop() // the reports are not checked here
	cfg := testConfig(t, "edge-hb", c.srv.URL())
	cfg.Workers = 8
	cfg.Clock.MaxSkew = time.Hour // the fake clock jumps: not a skew
	start := time.Now()
	clk := clock.NewFake(start)
	a := startAgent(t, cfg, WithClock(clk), WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.regs > 0 })

	ctx := context.Background()
	j := newJob("edge-hb", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 64
	due := start.Add(time.Minute)
	applied := make(chan error, runs)
	for i := range runs {
		cmd := runCmd(j, 1, due.Add(time.Duration(i)*time.Millisecond))
		cmd.V, cmd.Agent, cmd.IssuedAt = protocol.Version, "edge-hb", start.UTC()
		data, err := protocol.Encode(cmd)
		must(t, err)
		a.sched.Apply(uint64(i+1), data, func(err error) { applied <- err })
	}
	for range runs {
		must(t, <-applied)
	}
	waitFor(t, 20*time.Second, "runs planned on the wheel", func() bool {
		b := a.sched.Backlog()
		return b.Messages == 0 && b.OnWheels >= runs
	})

	// Stall the writer: the write below holds the batch open until released.
	unstall := stallStore(t, a)

	c.skew.Store(int64(time.Minute + 8*time.Second)) // the controller's clock moves with the agent's
	clk.Advance(time.Minute + 8*time.Second)
	inbox := func() int { return a.sched.Backlog().Messages }
	var last string
	waitFor(t, 30*time.Second, "the scheduler behind the store", func() bool {
		last = fmt.Sprintf("inbox %d, wheel fires waiting %d", inbox(), a.sched.Backlog().WheelFires)
		return a.sched.Backlog().WheelFires == scheduler.MaxQueuedFires
	})
	t.Log(last)

	h0, _ := c.heartbeats()
	for i := 1; i <= 2; i++ {
		// The second heartbeat is sent only after the first one's reply was handled.
		select {
		case a.hbKick <- struct{}{}:
		default:
		}
		waitFor(t, 10*time.Second, "a heartbeat while the scheduler is behind", func() bool {
			n, _ := c.heartbeats()
			return n >= h0+i
		})
	}
	if n := inbox(); n > scheduler.MaxQueuedFires+64 {
		t.Fatalf("scheduler mailbox holds %d messages while the store is stalled, want at most %d", n, scheduler.MaxQueuedFires+64)
	}
	_, hb := c.heartbeats()
	if hb.Stats.Pending == 0 {
		t.Errorf("heartbeat stats %+v: want the pending runs counted", hb.Stats)
	}

	unstall()
	// None is lost: every run leaves PENDING (the wheels catch up) and the
	// ones that ran succeeded.
	waitFor(t, 60*time.Second, "every run triggered", func() bool {
		cnt, err := a.Store().Counts(ctx)
		return err == nil && cnt.Pending == 0 && a.sched.Backlog().OnWheels == 0
	})
	execs, err := a.Store().JobExecs(ctx, j.ID, runs+1)
	must(t, err)
	if len(execs) != runs {
		t.Fatalf("%d attempts, want %d", len(execs), runs)
	}
	for _, e := range execs {
		if e.State == store.StatePending || (e.State == store.StateFinished && e.Outcome != "success") {
			t.Fatalf("attempt %s is %s (%s)", e.ExecID, e.State, e.Outcome)
		}
	}
}

// TestHeartbeatCarriesStoredCursor: with nats.report_cursor (the default)
// every heartbeat carries the command cursor the store holds, which the
// controller removes applied commands up to; with it false, none (a
// controller built before the field refuses it).
func TestHeartbeatCarriesStoredCursor(t *testing.T) {
	for _, report := range []bool{true, false} {
		t.Run(fmt.Sprintf("report_cursor=%v", report), func(t *testing.T) {
			c := startCtl(t)
			id := fmt.Sprintf("edge-cur-%v", report)
			cfg := testConfig(t, id, c.srv.URL())
			cfg.NATS.ReportCursor = report
			a := startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
			var last uint64
			for range 3 {
				run := runCmd(newJob(id, "noop", schedule.Spec{Asap: true}, nil), 1, time.Now())
				last = c.send(id, run)
				waitFinished(t, c, 10*time.Second, run.Run.ExecID)
			}
			stored := func() uint64 {
				v, ok, err := a.st.Meta(context.Background(), store.MetaCursor)
				if err != nil || !ok {
					return 0
				}
				var n uint64
				_, _ = fmt.Sscan(v, &n)
				return n
			}
			waitFor(t, 10*time.Second, "the store's cursor at the last command", func() bool { return stored() == last })
			n0, _ := c.heartbeats()
			waitFor(t, 10*time.Second, "two more heartbeats", func() bool { n, _ := c.heartbeats(); return n >= n0+2 })
			_, hb := c.heartbeats()
			want := uint64(0)
			if report {
				want = last
			}
			if hb.Cursor != want {
				t.Fatalf("heartbeat cursor %d, want %d (store holds %d)", hb.Cursor, want, stored())
			}
		})
	}
}
