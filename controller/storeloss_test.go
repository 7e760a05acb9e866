package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// registerFresh sends a registration of a with cursor and fresh and
// returns the reply.
func (a *testAgent) registerFresh(cursor uint64, fresh bool) protocol.RegisterReply {
	a.t.Helper()
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: a.id, Labels: a.labels,
		Handlers: []string{"noop"}, Cursor: cursor, Fresh: fresh, SentAt: time.Now()})
	if err != nil {
		a.t.Fatal(err)
	}
	msg, err := a.nc.Request(protocol.RegisterSubject(a.id), data, 10*time.Second)
	if err != nil {
		a.t.Fatal(err)
	}
	rr, err := protocol.DecodeRegisterReply(msg.Data)
	if err != nil || rr.Error != "" {
		a.t.Fatalf("register: %+v, %v", rr, err)
	}
	return rr
}

// lastSeq returns the stream sequence of the last command a received.
func (a *testAgent) lastSeq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cmds) == 0 {
		return 0
	}
	return a.cmds[len(a.cmds)-1].seq
}

// TestStoreLossResumes: an agent whose store lost its state (it registers
// fresh, or with a cursor below the one it had) is told to resume after
// the last command sent to it, and gets again its assignment and the run
// still PENDING, but not the run of the execution that finished.
func TestStoreLossResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cursor func(had uint64) uint64
		fresh  bool
	}{
		{"fresh store", func(uint64) uint64 { return 0 }, true},
		{"cursor went back", func(had uint64) uint64 { return had - 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestController(t)
			ctx := tctx(t)
			a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
			periodic, err := c.CreateJob(ctx, everyJob("edge-1", "1h"))
			if err != nil {
				t.Fatal(err)
			}
			done, err := c.CreateJob(ctx, asapJob("edge-1"))
			if err != nil {
				t.Fatal(err)
			}
			later, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
				Target: protocol.Target{Agent: "edge-1"}})
			if err != nil {
				t.Fatal(err)
			}
			a.waitCommand("assign", isAssign(periodic.ID, 0))
			run := a.waitCommand("run of the asap job", func(cmd protocol.Command) bool {
				return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == done.ID
			}).Run
			pending := a.waitCommand("run of the delayed job", func(cmd protocol.Command) bool {
				return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == later.ID
			}).Run
			a.runAttempt(done.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, retry.Result{})
			waitExec(t, c, run.ExecID, "SUCCESS", inState(protocol.StateSuccess))
			// The agent registers once more with its cursor (a reconnect).
			had := a.lastSeq()
			if rr := a.registerFresh(had, false); rr.ResumeAfter != 0 {
				t.Fatalf("reconnect with an intact store: resume_after %d", rr.ResumeAfter)
			}
			last := a.lastSeq()

			// The store is lost: the agent comes back.
			a.cc.Stop()
			a.mu.Lock()
			a.cmds = nil
			a.mu.Unlock()
			rr := a.registerFresh(tc.cursor(had), tc.fresh)
			if rr.ResumeAfter < last {
				t.Fatalf("resume_after %d, want at least the last command sent (%d)", rr.ResumeAfter, last)
			}
			a.mu.Lock()
			a.cursor = rr.ResumeAfter
			a.mu.Unlock()
			a.follow()
			a.waitCommand("assign again", isAssign(periodic.ID, 0))
			again := a.waitCommand("pending run again", isRun(pending.ExecID, 1)).Run
			if !again.RunAt.Equal(pending.RunAt) {
				t.Errorf("run sent again at %v, want %v", again.RunAt, pending.RunAt)
			}
			if slices.ContainsFunc(a.commands(), isRun(run.ExecID, 0)) {
				t.Fatalf("the run of finished %s was sent again", run.ExecID)
			}
			if n := testutil.MetricValue(t, c.m.storeResets); n != 1 {
				t.Errorf("%s = %v, want 1", metricStoreResets, n)
			}
			if got, _ := c.agents.Get("edge-1"); got.Cursor < rr.ResumeAfter {
				t.Errorf("recorded cursor %d, want at least %d", got.Cursor, rr.ResumeAfter)
			}
		})
	}
}

// TestStoreLossFloodResendsOnce: an agent's key registers "fresh" ten
// times in a row (each a claimed store loss). Its pending run is sent
// again once, not ten times: the resends of one agent run one at a time
// and at most one per storeLossResendEvery (an hour here), the later
// claims folded into one that waits.
func TestStoreLossFloodResendsOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.storeLossResendEvery = time.Hour
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	later, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	pending := a.waitCommand("run of the delayed job", func(cmd protocol.Command) bool {
		return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == later.ID
	}).Run
	for range 10 {
		a.registerFresh(0, true)
	}
	js := clientJS(t, c.NATSURL())
	runsOf := func() int {
		cons, err := js.OrderedConsumer(ctx, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{protocol.CommandSubject("edge-1")}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			batch, err := cons.FetchNoWait(100)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for m := range batch.Messages() {
				got++
				if cmd, err := protocol.DecodeCommand(m.Data()); err == nil && cmd.Kind == protocol.CmdRun && cmd.Run.ExecID == pending.ExecID {
					n++
				}
			}
			if got == 0 {
				return n
			}
		}
	}
	eventually(t, 20*time.Second, "ten store losses counted and the run sent again", func() bool {
		return testutil.MetricValue(t, c.m.storeResets) == 10 && runsOf() >= 2
	})
	if n := runsOf(); n != 2 {
		t.Fatalf("the pending run is in AX_CMD %d times, want 2 (sent, and sent again once)", n)
	}
}
