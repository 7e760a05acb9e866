package controller

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// storedRecord reads execution id from ax_execs itself (not readExec,
// which stores a held record first); nil when it has no record.
func storedRecord(t *testing.T, c *Controller, id string) *execRecord {
	t.Helper()
	v, err := c.ex.execs().Get(tctx(t), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return v.Rec
}

// startHeld starts a controller whose hold ticks every tick (logging to
// logs when not nil) and test agent edge-1, registered.
func startHeld(t *testing.T, tick time.Duration, logs *testutil.Buffer) (*Controller, *testAgent) {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.heldTick = tick
	if logs != nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	c := startController(t, cfg)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	return c, a
}

// createAsap creates a pinned one-shot job due now on edge-1 and returns
// it with its execution's id.
func createAsap(t *testing.T, c *Controller) (protocol.Job, string) {
	t.Helper()
	j, err := c.CreateJob(tctx(t), asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	return j, protocol.ExecID(j.ID, j.CreatedAt)
}

// oneReport is the one report ax-agent sends for a fast attempt: finished,
// standing for its triggered and running steps, with the scheduled time
// its exec id names (to the millisecond, as ax-agent reports it).
func oneReport(a *testAgent, jobID, execID string, scheduled time.Time) protocol.Report {
	if _, at, err := protocol.ParseExecID("exec_id", execID); err == nil {
		scheduled = at
	}
	r := finished(a.rep(jobID, execID, 1, protocol.ReportFinished, scheduled), retry.OutcomeSuccess, retry.Result{Code: 0}, 5*time.Millisecond)
	r.TriggeredAt, r.StartedAt = r.At.Add(-7*time.Millisecond), r.At.Add(-6*time.Millisecond)
	return r
}

// TestCreateHeldOneRecordWrite: the create of a pinned one-shot job due now
// writes no execution record (createheld.go); the agent's one report makes
// it, SUCCESS in one write with the whole path, and the PENDING event that
// was held is never stored.
func TestCreateHeldOneRecordWrite(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.heldTick = time.Hour // the hold never ends on its own in this test
	c := startController(t, cfg)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	er := recordEvents(t, c.NATSURL())
	before := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs))
	j, execID := createAsap(t, c)
	if got := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs)); got != before {
		t.Errorf("ax_execs stream at %d after the create, want %d (the record held)", got, before)
	}
	if r := storedRecord(t, c, execID); r != nil {
		t.Fatalf("record of %s stored at the create: %+v", execID, r.Execution)
	}
	a.waitCommand("run of "+execID, isRun(execID, 1))
	a.publish(oneReport(a, j.ID, execID, j.CreatedAt), "")
	eventually(t, 20*time.Second, execID+" SUCCESS in ax_execs", func() bool {
		r := storedRecord(t, c, execID)
		return r != nil && r.State == protocol.StateSuccess
	})
	if got := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs)); got != before+1 {
		t.Errorf("ax_execs stream at %d after the report, want %d (one write)", got, before+1)
	}
	want := []protocol.State{protocol.StateTriggered, protocol.StateRunning, protocol.StateSuccess}
	if r := storedRecord(t, c, execID); !slices.Equal(r.Path, want) || r.Agent != "edge-1" || !r.CreatedAt.Before(r.TriggeredAt.Add(time.Second)) {
		t.Errorf("record %+v (path %v), want path %v on edge-1, made at the create", r.Execution, r.Path, want)
	}
	eventually(t, 10*time.Second, "the create's op closed", func() bool { return c.marks.Mark().Open == 0 })
	eventually(t, 10*time.Second, "the SUCCESS event", func() bool { return len(er.Path(execID)) > 0 })
	if es := er.Of(execID); len(es) != 1 || es[0].From != protocol.StatePending || es[0].To != protocol.StateSuccess {
		t.Errorf("events of %s: %+v, want one, PENDING to SUCCESS", execID, es)
	}
	if storedEvent(t, c.js, protocol.StatePending, j.ID) {
		t.Errorf("PENDING event of %s stored, want it dropped", execID)
	}
}

// TestCreateHeldStoredAfterHold: a held record whose agent does not report
// is stored PENDING two hold ticks later, with its PENDING event, and the
// create's op closes then.
func TestCreateHeldStoredAfterHold(t *testing.T) {
	c, a := startHeld(t, 50*time.Millisecond, nil)
	er := recordEvents(t, c.NATSURL())
	before := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs))
	j, err := c.CreateJob(tctx(t), asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	execID := protocol.ExecID(j.ID, j.CreatedAt)
	eventually(t, 20*time.Second, execID+" stored", func() bool { return storedRecord(t, c, execID) != nil })
	if r := storedRecord(t, c, execID); r.State != protocol.StatePending || r.Agent != "edge-1" {
		t.Errorf("record after the hold: %+v, want PENDING on edge-1", r.Execution)
	}
	eventually(t, 10*time.Second, "the PENDING event", func() bool { return len(er.Path(execID)) > 0 })
	if p := er.Path(execID); p[0] != protocol.StatePending {
		t.Errorf("events of %s: %v, want PENDING", execID, p)
	}
	eventually(t, 10*time.Second, "the create's op closed", func() bool { return c.marks.Mark().Open == 0 })
	// The report that comes later applies to the stored record.
	a.publish(oneReport(a, j.ID, execID, j.CreatedAt), "")
	waitExec(t, c, execID, "SUCCESS", inState(protocol.StateSuccess))
	if got := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs)); got != before+2 {
		t.Errorf("ax_execs stream at %d, want %d (PENDING after the hold, then SUCCESS)", got, before+2)
	}
}

// TestCreateHeldReadStoresFirst: a held record is there to read
// (GetExecution answers from the hold) and to change (readExec, under an
// operator's cancel, stores it first) the moment CreateJob answered.
func TestCreateHeldReadStoresFirst(t *testing.T) {
	c, a := startHeld(t, time.Hour, nil)
	ctx := tctx(t)
	_, execID := createAsap(t, c)
	e, err := c.GetExecution(ctx, execID)
	if err != nil || e.State != protocol.StatePending || e.Agent != "edge-1" {
		t.Fatalf("GetExecution right after the create: %+v, %v; want PENDING on edge-1", e, err)
	}
	if r := storedRecord(t, c, execID); r != nil {
		t.Fatalf("record after GetExecution: %+v, want it still held (a read does not store it)", r.Execution)
	}
	if r := readRecord(t, c, execID); r.State != protocol.StatePending {
		t.Fatalf("readExec: %+v, want PENDING", r.Execution)
	}
	if r := storedRecord(t, c, execID); r == nil || r.State != protocol.StatePending {
		t.Fatalf("record after readExec: %+v, want stored PENDING (a change reads it first)", r)
	}
	_, exec2 := createAsap(t, c)
	if e, err := c.CancelExecution(ctx, exec2); err != nil || e.State != protocol.StateCancelled {
		t.Fatalf("cancel right after the create: %+v, %v; want CANCELLED", e, err)
	}
	a.waitCommand("cancel of "+exec2, func(cmd protocol.Command) bool {
		return cmd.Kind == protocol.CmdCancel && cmd.Cancel.ExecID == exec2
	})
	list, _, err := c.ListExecutions(ctx, ExecFilter{Agent: "edge-1"})
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v; want both executions", list, err)
	}
	eventually(t, 10*time.Second, "the creates' ops closed", func() bool { return c.marks.Mark().Open == 0 })
}

// TestCreateHeldCrash: a controller killed after it sent the run of a held
// record and before it stored the record leaves the job and the run only.
// The agent's report, sent while no controller ran, is applied by the next
// controller's lane before its reload (held up until then): the report
// creates the record (ingest's firstOfOneShot). Sent after the restart, it
// applies to the PENDING record the reload made, which does not send the
// run again: AX_CMD holds it (sendRemadeRuns). Either way the execution
// ends SUCCESS once, and AX_CMD holds its run once.
func TestCreateHeldCrash(t *testing.T) {
	for _, reportFirst := range []bool{true, false} {
		name := "report after the reload"
		if reportFirst {
			name = "report before the reload"
		}
		t.Run(name, func(t *testing.T) {
			cfg, c1, a := onExternalServer(t, func(cfg *Config) { cfg.heldTick = time.Hour })
			a.register()
			ctx := tctx(t)
			j, err := c1.CreateJob(ctx, asapJob("edge-1"))
			if err != nil {
				t.Fatal(err)
			}
			execID := protocol.ExecID(j.ID, j.CreatedAt)
			a.waitCommand("run of "+execID, isRun(execID, 1))
			sentBy := time.Now()
			c1.abandon()
			if reportFirst {
				a.publish(oneReport(a, j.ID, execID, j.CreatedAt), "")
			}
			execs, err := clientJS(t, cfg.NATS.URL).KeyValue(ctx, protocol.BucketExecs)
			if err != nil {
				t.Fatal(err)
			}
			logs := &testutil.Buffer{}
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			cfg.Registry = nil
			// Past AX_CMD's de-duplication window, so that a copy of the run
			// would be stored.
			eventually(t, 5*time.Second, "AX_CMD's de-duplication window passed", func() bool {
				return time.Since(sentBy) > 2*streams.CommandDuplicates
			})
			c2, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c2.Close() })
			var laneFirst bool
			if reportFirst {
				var once sync.Once
				c2.hooks.beforeReload = func(context.Context) {
					once.Do(func() {
						// The record's first value, from a watch of its key
						// (an initial one if it is there already), or none
						// within 20 s.
						wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
						defer cancel()
						w, err := execs.Watch(wctx, execID)
						if err != nil {
							return
						}
						defer func() { _ = w.Stop() }()
						for {
							select {
							case e := <-w.Updates():
								if e != nil {
									laneFirst = true
									return
								}
							case <-wctx.Done():
								return
							}
						}
					})
				}
			}
			if err := c2.Start(ctx); err != nil {
				t.Fatal(err)
			}
			r := waitLogRecord(t, 20*time.Second, logs, "executions reloaded", nil)
			if reportFirst {
				if !laneFirst {
					t.Fatal("the report made no record before the reload")
				}
				if r["one_shot_recreated"] != float64(0) {
					t.Errorf("reload %v: want nothing made again (the report made the record)", r)
				}
			} else {
				if r["one_shot_recreated"] != float64(1) {
					t.Errorf("reload %v: want the held record made", r)
				}
				if rec := storedRecord(t, c2, execID); rec == nil || rec.State != protocol.StatePending {
					t.Fatalf("record after the reload: %+v, want PENDING", rec)
				}
				a.publish(oneReport(a, j.ID, execID, j.CreatedAt), "")
			}
			e := waitExec(t, c2, execID, "SUCCESS", inState(protocol.StateSuccess))
			if e.Agent != "edge-1" || e.Attempt != 1 {
				t.Errorf("execution %+v, want attempt 1 on edge-1", e)
			}
			runs := 0
			for _, cmd := range a.commands() {
				if isRun(execID, 1)(cmd) {
					runs++
				}
			}
			if runs != 1 {
				t.Errorf("%d run commands of %s in AX_CMD, want 1 (the reload sends the run of a record it made again only when AX_CMD lacks it)", runs, execID)
			}
		})
	}
}

// TestCreateHeldDeleteStoresRecord: deleting (or pausing) a one-shot job
// whose record its create holds stores the record first: the run goes on
// to its end (a deleted job's executions do), and its report must find it,
// also after a crash that would have lost the hold (the next reload makes
// records for live, unpaused jobs only).
func TestCreateHeldDeleteStoresRecord(t *testing.T) {
	c, a := startHeld(t, time.Hour, nil)
	ctx := tctx(t)
	j, execID := createAsap(t, c)
	if r := storedRecord(t, c, execID); r != nil {
		t.Fatalf("record stored at the create: %+v", r.Execution)
	}
	if err := c.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if r := storedRecord(t, c, execID); r == nil || r.State != protocol.StatePending {
		t.Fatalf("record after the delete: %+v, want stored PENDING", r)
	}
	// A pause likewise.
	p, pausedID := createAsap(t, c)
	if _, err := c.PauseJob(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if r := storedRecord(t, c, pausedID); r == nil || r.State != protocol.StatePending {
		t.Fatalf("record after the pause: %+v, want stored PENDING", r)
	}
	a.publish(oneReport(a, j.ID, execID, j.CreatedAt), "")
	eventually(t, 20*time.Second, execID+" SUCCESS after its job's delete", func() bool {
		r := storedRecord(t, c, execID)
		return r != nil && r.State == protocol.StateSuccess
	})
}

// TestCreateHeldStoreRetried: a held record the store refuses (ax_execs'
// stream made to refuse every message by its size limit) stays held, and
// readable, and is stored at a later tick once the store takes it; the
// create's op stays open until then.
func TestCreateHeldStoreRetried(t *testing.T) {
	logs := &testutil.Buffer{}
	c, _ := startHeld(t, 50*time.Millisecond, logs)
	ctx := tctx(t)
	st, err := c.js.Stream(ctx, streams.KVStream(protocol.BucketExecs))
	if err != nil {
		t.Fatal(err)
	}
	scfg := st.CachedInfo().Config
	scfg.MaxMsgSize = 16
	if _, err := c.js.UpdateStream(ctx, scfg); err != nil {
		t.Fatal(err)
	}
	_, execID := createAsap(t, c)
	// Tried and refused, held again.
	waitLogRecord(t, 20*time.Second, logs, "store held execution record; held to try again", nil)
	if m := c.marks.Mark(); m.Open == 0 {
		t.Errorf("mark %+v: want the create's op open while its record is not stored", m)
	}
	if r := storedRecord(t, c, execID); r != nil {
		t.Fatalf("record stored past the size limit: %+v", r.Execution)
	}
	if e, err := c.GetExecution(ctx, execID); err != nil || e.State != protocol.StatePending {
		t.Fatalf("GetExecution while the store refuses: %+v, %v; want PENDING from the hold", e, err)
	}
	scfg.MaxMsgSize = -1
	if _, err := c.js.UpdateStream(ctx, scfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, execID+" stored", func() bool { return storedRecord(t, c, execID) != nil })
	eventually(t, 10*time.Second, "the create's op closed", func() bool { return c.marks.Mark().Open == 0 })
}
