package controller

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// historyFixture runs fires of two pinned periodic jobs: job a on edge-1
// (five fires: three SUCCESS, one FAILED, one left TRIGGERED) and job b on
// edge-2 (two SUCCESS). It returns the exec ids of each job in fire order.
func historyFixture(t *testing.T, c *Controller) (a, b []string, sched map[string]time.Time) {
	t.Helper()
	ctx := tctx(t)
	sched = map[string]time.Time{}
	fire := func(agent string, n int, outcome func(i int) (retry.Outcome, retry.Result, bool)) []string {
		ag := newTestAgent(t, c.NATSURL(), agent, nil).start()
		job, err := c.CreateJob(ctx, everyJob(agent, "1s"))
		if err != nil {
			t.Fatal(err)
		}
		ag.waitCommand("assign", isAssign(job.ID, 1))
		s, err := schedule.Parse(job.Schedule, job.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		at := job.CreatedAt
		for i := range n {
			at, _ = s.Next(at)
			id := protocol.ExecID(job.ID, at)
			ids, sched[id] = append(ids, id), at
			o, res, done := outcome(i)
			if !done {
				ag.publish(ag.rep(job.ID, id, 1, protocol.ReportTriggered, at), "")
				waitExec(t, c, id, "TRIGGERED", inState(protocol.StateTriggered))
				continue
			}
			ag.runAttempt(job.ID, id, 1, at, o, res)
			waitExec(t, c, id, "terminal", func(e protocol.Execution) bool { return e.State.Terminal() })
		}
		return ids
	}
	a = fire("edge-1", 5, func(i int) (retry.Outcome, retry.Result, bool) {
		switch i {
		case 3:
			return retry.OutcomeFailure, permanent, true
		case 4:
			return "", retry.Result{}, false
		}
		return retry.OutcomeSuccess, ok, true
	})
	b = fire("edge-2", 2, func(int) (retry.Outcome, retry.Result, bool) { return retry.OutcomeSuccess, ok, true })
	// The event of a transition is published after its record is written,
	// so the index may still lack the last step of a record seen above.
	for _, id := range append(slices.Clone(a), b...) {
		want := waitExec(t, c, id, "stored", func(protocol.Execution) bool { return true })
		eventually(t, 20*time.Second, id+" indexed in state "+string(want.State), func() bool {
			c.hist.upToDate(ctx) // writes the snapshots of live executions the follower holds back
			e, ok, err := c.hist.idx.Get(ctx, id)
			return err == nil && ok && e.State == want.State
		})
	}
	return a, b, sched
}

// listIDs lists with f and returns the exec ids of the page.
func listIDs(t *testing.T, c *Controller, f ExecFilter) []string {
	t.Helper()
	es, _, err := c.ListExecutions(tctx(t), f)
	if err != nil {
		t.Fatalf("ListExecutions(%+v): %v", f, err)
	}
	return protocoltest.ExecIDs(es)
}

func sorted(ids ...[]string) []string {
	out := slices.Concat(ids...)
	slices.Sort(out)
	return out
}

// TestHistoryListFilters: ListExecutions answers from the history index
// with the filters job, agent, state and the scheduled time range
// [from, to), ordered by exec id, paged by limit and after.
func TestHistoryListFilters(t *testing.T) {
	c := newTestController(t)
	a, b, sched := historyFixture(t, c)
	if got, want := listIDs(t, c, ExecFilter{}), sorted(a, b); !slices.Equal(got, want) {
		t.Fatalf("all = %v, want %v", got, want)
	}
	jobA, _, _ := protocol.ParseExecID("exec_id", a[0])
	if got := listIDs(t, c, ExecFilter{JobID: jobA}); !slices.Equal(got, sorted(a)) {
		t.Errorf("job %s = %v, want %v", jobA, got, a)
	}
	if got := listIDs(t, c, ExecFilter{Agent: "edge-2"}); !slices.Equal(got, sorted(b)) {
		t.Errorf("agent edge-2 = %v, want %v", got, b)
	}
	if got, want := listIDs(t, c, ExecFilter{State: protocol.StateSuccess}), sorted(a[:3], b); !slices.Equal(got, want) {
		t.Errorf("SUCCESS = %v, want %v", got, want)
	}
	if got := listIDs(t, c, ExecFilter{State: protocol.StateTriggered}); !slices.Equal(got, a[4:]) {
		t.Errorf("TRIGGERED = %v, want %v", got, a[4:])
	}
	if got := listIDs(t, c, ExecFilter{State: protocol.StateFailed, Agent: "edge-1"}); !slices.Equal(got, a[3:4]) {
		t.Errorf("FAILED on edge-1 = %v, want %v", got, a[3:4])
	}
	// [from, to) on scheduled_at.
	f := ExecFilter{JobID: jobA, From: sched[a[1]], To: sched[a[3]]}
	if got := listIDs(t, c, f); !slices.Equal(got, a[1:3]) {
		t.Errorf("from %s to %s = %v, want %v", f.From, f.To, got, a[1:3])
	}
	if got := listIDs(t, c, ExecFilter{From: sched[a[4]].Add(time.Millisecond), JobID: jobA}); len(got) != 0 {
		t.Errorf("from after the last fire = %v, want none", got)
	}
	// Paging: pages of two, in exec id order, cover everything once.
	var paged []string
	after := ""
	for range 10 {
		es, next, err := c.ListExecutions(tctx(t), ExecFilter{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, protocoltest.ExecIDs(es)...)
		if next == "" {
			break
		}
		after = next
	}
	if want := sorted(a, b); !slices.Equal(paged, want) {
		t.Errorf("paged = %v, want %v", paged, want)
	}
	var fe *protocol.FieldError
	if _, _, err := c.ListExecutions(tctx(t), ExecFilter{From: sched[a[2]], To: sched[a[1]]}); !errors.As(err, &fe) || fe.Field != "to" {
		t.Errorf("to before from: err = %v, want a field error on to", err)
	}
}

// TestHistoryIndexRebuiltAndResumed: the index lives in DataDir; deleted,
// it is rebuilt from AX_EVT at the next start with the same content; kept,
// the next start resumes at the sequence stored with it.
func TestHistoryIndexRebuiltAndResumed(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	c := startController(t, cfg)
	a, b, _ := historyFixture(t, c)
	want, _, err := c.ListExecutions(tctx(t), ExecFilter{})
	if err != nil || len(want) != len(a)+len(b) {
		t.Fatalf("list = %d, %v", len(want), err)
	}
	_ = c.Close()
	path := filepath.Join(dir, historyFile)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("history index file: %v", err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}

	c = startController(t, cfg)
	got, _, err := c.ListExecutions(tctx(t), ExecFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(x, y protocol.Execution) bool {
		return x.ExecID == y.ExecID && x.State == y.State && x.Agent == y.Agent && x.ScheduledAt.Equal(y.ScheduledAt) &&
			x.Attempt == y.Attempt && x.Outcome == y.Outcome && x.Duration == y.Duration
	}) {
		t.Fatalf("rebuilt index lists %+v, want %+v", got, want)
	}
	last := c.hist.appliedSeq()
	_ = c.Close()

	c = startController(t, cfg)
	if seq := c.hist.appliedSeq(); seq != last {
		t.Fatalf("restart resumed at sequence %d, want %d (stored with the rows)", seq, last)
	}
	if got := listIDs(t, c, ExecFilter{}); !slices.Equal(got, protocoltest.ExecIDs(want)) {
		t.Fatalf("after restart = %v", got)
	}
}

// TestHistoryHoldsLiveSnapshots: the follower holds back the snapshot of
// a live execution (histindex.Holdback) while it writes the terminal ones
// that come after it, and its cursor stays before the held one's event;
// a list writes what is held first and shows it.
func TestHistoryHoldsLiveSnapshots(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.historyHold = time.Hour // held until a reader asks, however long the test runs
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()

	held, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	runOf := func(jobID string) func(protocol.Command) bool {
		return func(cmd protocol.Command) bool {
			return cmd.Kind == protocol.CmdRun && strings.HasPrefix(cmd.Run.ExecID, jobID)
		}
	}
	heldRun := a.waitCommand("run of the held job", runOf(held.ID)).Run
	done, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run of the finished job", runOf(done.ID)).Run
	a.runAttempt(done.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, ok)
	// The finished execution's events come after the held one's PENDING
	// event; once the index has them, the follower has read that too.
	eventually(t, 20*time.Second, "finished execution indexed", func() bool {
		e, ok, err := c.hist.idx.Get(ctx, run.ExecID)
		return err == nil && ok && e.State == protocol.StateSuccess
	})
	if _, ok, err := c.hist.idx.Get(ctx, heldRun.ExecID); err != nil || ok {
		t.Fatalf("held execution in the index before any reader asked: %t, %v", ok, err)
	}
	cursor, err := c.hist.idx.Cursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.hist.evt.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cursor >= info.State.LastSeq {
		t.Fatalf("cursor %d past the held event (stream ends at %d)", cursor, info.State.LastSeq)
	}
	list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: held.ID})
	if err != nil || len(list) != 1 || list[0].State != protocol.StatePending || list[0].ExecID != heldRun.ExecID {
		t.Fatalf("list of the held job = %+v, %v", list, err)
	}
	if e, ok, err := c.hist.idx.Get(ctx, heldRun.ExecID); err != nil || !ok || e.State != protocol.StatePending {
		t.Fatalf("held execution after the list: %+v, %t, %v", e, ok, err)
	}
	// A restart resumes at the stored cursor and keeps the rows.
	_ = c.Close()
	c = startController(t, cfg)
	list, _, err = c.ListExecutions(ctx, ExecFilter{})
	if err != nil || len(list) != 2 {
		t.Fatalf("after restart: %+v, %v", list, err)
	}
}

// TestHistoryWritesQuietSnapshots: the snapshot of a live execution whose
// next step is not due within the hold (a delayed one-shot's PENDING) is
// not held back: the follower writes it with its batch, before any reader
// asks, and its cursor moves past its event. A reader after a burst of
// delayed creates then waits for no commit of the whole burst's rows.
func TestHistoryWritesQuietSnapshots(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.historyHold = time.Hour // a held snapshot would wait for a reader, however long the test runs
	c := startController(t, cfg)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()

	// Due after the hold and its margin (historyQuietMargin).
	j, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "3h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run of the delayed job", func(cmd protocol.Command) bool {
		return cmd.Kind == protocol.CmdRun && strings.HasPrefix(cmd.Run.ExecID, j.ID)
	}).Run
	eventually(t, 30*time.Second, "delayed execution indexed without a reader", func() bool {
		e, ok, err := c.hist.idx.Get(ctx, run.ExecID)
		return err == nil && ok && e.State == protocol.StatePending
	})
	info, err := c.hist.evt.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "cursor past the PENDING event", func() bool {
		cursor, err := c.hist.idx.Cursor(ctx)
		return err == nil && cursor >= info.State.LastSeq
	})
}
