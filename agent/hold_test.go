package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// holdRig is an agent with one worker, a "block" handler that holds it
// until release is closed (or its context ends), a "long" handler that
// runs until releaseLong is closed and a "noop" handler, so that an
// attempt waits in the ready queue behind a block attempt for as long as
// the test wants.
type holdRig struct {
	c                    *ctl
	a                    *Agent
	release, releaseLong chan struct{}
	started              chan struct{}
	at                   time.Time
}

func newHoldRig(t *testing.T, id string, hold time.Duration, start func(Config, ...Option) *Agent) *holdRig {
	t.Helper()
	r := &holdRig{c: startCtl(t), release: make(chan struct{}), releaseLong: make(chan struct{}), started: make(chan struct{}, 1),
		at: time.Now().Add(-time.Second)}
	cfg := testConfig(t, id, r.c.srv.URL())
	cfg.Workers = 1
	cfg.Outbox.Hold = hold
	cfg.Shutdown.Grace = 100 * time.Millisecond
	r.a = start(cfg,
		WithHandler("block", func(ctx context.Context, _ Task) Result {
			r.started <- struct{}{}
			select {
			case <-r.release:
			case <-ctx.Done():
			}
			return Result{}
		}),
		WithHandler("long", func(ctx context.Context, _ Task) Result {
			select {
			case <-r.releaseLong:
			case <-ctx.Done():
			}
			return Result{}
		}),
		WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { r.c.mu.Lock(); defer r.c.mu.Unlock(); return r.c.regs > 0 })
	return r
}

// queue starts a block attempt, waits until it holds the worker, then
// sends a run of handler and waits until its attempt is triggered
// (queued); it returns that execution's id.
func (r *holdRig) queue(t *testing.T, id, handler string) string {
	t.Helper()
	r.c.send(id, runCmd(newJob(id, "block", schedule.Spec{Asap: true}, nil), 1, r.at))
	select {
	case <-r.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the block handler did not start")
	}
	j := newJob(id, handler, schedule.Spec{Asap: true}, nil)
	r.c.send(id, runCmd(j, 1, r.at))
	execID := protocol.ExecID(j.ID, r.at)
	waitFor(t, 10*time.Second, "the queued attempt triggered", func() bool {
		e, err := r.a.Store().ExecByID(context.Background(), execID, 1)
		return err == nil && e.State == store.StateTriggered
	})
	return execID
}

// sent is how many report messages of step kind of attempt 1 of execID
// the controller double received.
func (r *holdRig) sent(execID string, kind protocol.ReportKind) int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.msgIDs[r.a.msgSalt+"/"+protocol.ReportMsgID(execID, 1, kind)]
}

// sentAll is how many report messages of execID the double received.
func (r *holdRig) sentAll(execID string) int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	n := 0
	for id, k := range r.c.msgIDs {
		if strings.HasPrefix(id, r.a.msgSalt+"/"+execID+"/") {
			n += k
		}
	}
	return n
}

// stepSeen reports whether the double knows of the step (a report of it,
// or a later one carrying its time).
func (r *holdRig) stepSeen(execID string, kind protocol.ReportKind) bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.steps[protocol.ReportMsgID(execID, 1, kind)]
}

// notSentFor polls for d that the triggered report of execID is not
// published; it fails the test when it is.
func (r *holdRig) notSentFor(t *testing.T, execID string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	waitFor(t, d+10*time.Second, "the end of the wait, or the triggered report", func() bool {
		return r.sent(execID, protocol.ReportTriggered) > 0 || time.Now().After(end)
	})
	if r.sent(execID, protocol.ReportTriggered) > 0 {
		t.Fatal("the queued attempt's triggered report was published before its hold ended")
	}
}

// TestHoldCoalescesQueuedAttempt: an attempt that waits in the ready queue
// far longer than outbox.linger, then runs fast, reaches AX_RPT as one
// message (the finished report, carrying triggered_at and started_at),
// not as a triggered report followed by running and finished.
func TestHoldCoalescesQueuedAttempt(t *testing.T) {
	r := newHoldRig(t, "edge-hq", MaxOutboxHold, func(cfg Config, o ...Option) *Agent { return startAgent(t, cfg, o...) })
	execID := r.queue(t, "edge-hq", "noop")
	// 30 lingers: without the hold the triggered report is out by now.
	r.notSentFor(t, execID, 30*DefaultOutboxLinger)
	close(r.release)
	waitFor(t, 10*time.Second, "the finished report", func() bool { return r.sent(execID, protocol.ReportFinished) > 0 })
	fin, _ := finishedOf(r.c, execID)
	if fin.TriggeredAt.IsZero() || fin.StartedAt.IsZero() {
		t.Fatalf("finished report %+v: want triggered_at and started_at", fin)
	}
	if n := r.sentAll(execID); n != 1 {
		t.Fatalf("%d report messages of the attempt, want 1 (triggered %d, running %d, finished %d)", n,
			r.sent(execID, protocol.ReportTriggered), r.sent(execID, protocol.ReportRunning), r.sent(execID, protocol.ReportFinished))
	}
}

// TestHoldLongRunningReportsRunning: an attempt whose handler runs long
// is reported running (one message, carrying triggered_at) once the hold
// ends, while the handler still runs, and finished later.
func TestHoldLongRunningReportsRunning(t *testing.T) {
	const hold = 400 * time.Millisecond
	r := newHoldRig(t, "edge-hl", hold, func(cfg Config, o ...Option) *Agent { return startAgent(t, cfg, o...) })
	j := newJob("edge-hl", "long", schedule.Spec{Asap: true}, nil)
	execID := protocol.ExecID(j.ID, r.at)
	sentAt := time.Now()
	r.c.send("edge-hl", runCmd(j, 1, r.at))
	var seenAt time.Time
	waitFor(t, 10*time.Second, "the running step at the controller", func() bool {
		ok := r.stepSeen(execID, protocol.ReportRunning)
		if ok {
			seenAt = time.Now()
		}
		return ok
	})
	if d := seenAt.Sub(sentAt); d < hold {
		t.Fatalf("running reached the controller %s after the run was sent, before its hold (%s) ended", d, hold)
	}
	if tr, ru, fi := r.sent(execID, protocol.ReportTriggered), r.sent(execID, protocol.ReportRunning), r.sent(execID, protocol.ReportFinished); tr != 0 || ru != 1 || fi != 0 {
		t.Fatalf("reports triggered %d, running %d, finished %d; want 0, 1, 0 while the handler runs", tr, ru, fi)
	}
	if ru := r.reportOf(execID, protocol.ReportRunning); ru.TriggeredAt.IsZero() {
		t.Fatalf("running report %+v: want triggered_at", ru)
	}
	close(r.releaseLong)
	waitFor(t, 10*time.Second, "the finished report", func() bool { return r.sent(execID, protocol.ReportFinished) == 1 })
}

// reportOf returns the report of kind of execID the double received.
func (r *holdRig) reportOf(execID string, kind protocol.ReportKind) protocol.Report {
	for _, rep := range r.c.reportsOf(execID) {
		if rep.Kind == kind {
			return rep
		}
	}
	return protocol.Report{}
}

// TestHoldZeroSendsTriggeredWhileQueued: with outbox.hold 0 a queued
// attempt's triggered report is published after the linger, as before
// the hold existed.
func TestHoldZeroSendsTriggeredWhileQueued(t *testing.T) {
	r := newHoldRig(t, "edge-h0", 0, func(cfg Config, o ...Option) *Agent { return startAgent(t, cfg, o...) })
	execID := r.queue(t, "edge-h0", "noop")
	waitFor(t, 10*time.Second, "the triggered report while queued", func() bool { return r.sent(execID, protocol.ReportTriggered) == 1 })
	close(r.release)
	waitFor(t, 10*time.Second, "the finished report", func() bool { return r.sent(execID, protocol.ReportFinished) == 1 })
}

// TestHoldReleasedOnShutdown: a report still held when the agent stops
// is published by the final flush, not left for the next run.
func TestHoldReleasedOnShutdown(t *testing.T) {
	var stop context.CancelFunc
	done := make(chan error, 1)
	r := newHoldRig(t, "edge-hs", MaxOutboxHold, func(cfg Config, o ...Option) *Agent {
		a, err := New(cfg, append([]Option{WithLogger(testLogger(t))}, o...)...)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		go func() { done <- a.Run(ctx) }()
		return a
	})
	defer stop()
	execID := r.queue(t, "edge-hs", "noop")
	holdEnds := time.Now().Add(MaxOutboxHold) // at the earliest
	r.notSentFor(t, execID, 30*DefaultOutboxLinger)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop")
	}
	waitFor(t, 10*time.Second, "the queued attempt's triggered step at the controller", func() bool {
		return r.stepSeen(execID, protocol.ReportTriggered)
	})
	if time.Now().After(holdEnds) {
		t.Fatal("the held report was published only after its hold could have ended, not by the final flush")
	}
}

// TestHoldReleasedOnReconnect: when the link comes back (the agent
// registers again) the reports it holds are published at once, not at
// the end of their hold.
func TestHoldReleasedOnReconnect(t *testing.T) {
	r := newHoldRig(t, "edge-hr", MaxOutboxHold, func(cfg Config, o ...Option) *Agent { return startAgent(t, cfg, o...) })
	execID := r.queue(t, "edge-hr", "noop")
	holdEnds := time.Now().Add(MaxOutboxHold) // at the earliest
	r.notSentFor(t, execID, 30*DefaultOutboxLinger)
	r.c.mu.Lock()
	regs := r.c.regs
	r.c.mu.Unlock()
	r.c.srv.Restart()
	waitFor(t, 10*time.Second, "registered again", func() bool { r.c.mu.Lock(); defer r.c.mu.Unlock(); return r.c.regs > regs })
	waitFor(t, 10*time.Second, "the held triggered report", func() bool { return r.sent(execID, protocol.ReportTriggered) == 1 })
	if time.Now().After(holdEnds) {
		t.Fatal("the held report was published only after its hold could have ended, not when the link came back")
	}
	close(r.release)
	waitFor(t, 10*time.Second, "the finished report", func() bool { return r.sent(execID, protocol.ReportFinished) == 1 })
}

// TestHoldCoalescesQueuedPeriodicFire: a fire of a periodic job that
// waits in the ready queue far longer than outbox.linger, then runs fast,
// reaches AX_RPT as one message (the finished report, carrying
// triggered_at and started_at, from which the controller makes the
// fire's record), as a run the controller sent does.
func TestHoldCoalescesQueuedPeriodicFire(t *testing.T) {
	r := newHoldRig(t, "edge-hp", MaxOutboxHold, func(cfg Config, o ...Option) *Agent { return startAgent(t, cfg, o...) })
	r.c.send("edge-hp", runCmd(newJob("edge-hp", "block", schedule.Spec{Asap: true}, nil), 1, r.at))
	select {
	case <-r.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the block handler did not start")
	}
	j := newJob("edge-hp", "noop", schedule.Spec{Every: "1h"}, nil)
	j.CreatedAt = time.Now().Add(-time.Hour + 300*time.Millisecond) // its first fire comes in 0.3 s
	r.c.send("edge-hp", assignCmd(j))
	var execID string
	waitFor(t, 10*time.Second, "a fire of the periodic job triggered behind the blocker", func() bool {
		es, err := r.a.Store().JobExecs(context.Background(), j.ID, 1)
		if err != nil || len(es) == 0 || es[0].State != store.StateTriggered {
			return false
		}
		execID = es[0].ExecID
		return true
	})
	// 30 lingers: without the hold the triggered report is out by now.
	r.notSentFor(t, execID, 30*DefaultOutboxLinger)
	close(r.release)
	waitFor(t, 10*time.Second, "the finished report", func() bool { return r.sent(execID, protocol.ReportFinished) > 0 })
	fin, _ := finishedOf(r.c, execID)
	if fin.TriggeredAt.IsZero() || fin.StartedAt.IsZero() {
		t.Fatalf("finished report %+v: want triggered_at and started_at", fin)
	}
	if n := r.sentAll(execID); n != 1 {
		t.Fatalf("%d report messages of the fire, want 1 (triggered %d, running %d, finished %d)", n,
			r.sent(execID, protocol.ReportTriggered), r.sent(execID, protocol.ReportRunning), r.sent(execID, protocol.ReportFinished))
	}
}
