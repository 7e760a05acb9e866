package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/schedule"
)

// TestDispatchedBatchStartsInOneStatement: the attempts the run queue
// dispatches together are marked RUNNING by one UPDATE and their running
// reports written by one insert, in one write function (it was an UPDATE
// and an insert per attempt); each is RUNNING and handed to a worker.
func TestDispatchedBatchStartsInOneStatement(t *testing.T) {
	cfg := offlineConfig(t, "edge-d")
	cfg.Workers = 8
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	s := o.s
	j := protocoltest.NewJob("edge-d", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 8
	s.runs.busy = cfg.Workers // hold dispatch until every run is stored
	for i := range 8 {
		o.apply(protocoltest.RunCmd(j, 1, start.Add(-time.Duration(8-i)*time.Second)))
	}
	s.runs.busy = 0
	st0 := o.st.Stats()
	s.runs.pump()
	o.sync()
	st := o.st.Stats()
	if got := st.Statements - st0.Statements; got > 2 {
		t.Fatalf("starting 8 attempts took %d statements, want 2", got)
	}
	if len(s.runs.running) != 8 || len(s.runs.work) != 8 {
		t.Fatalf("%d running, %d handed to workers; want 8 and 8", len(s.runs.running), len(s.runs.work))
	}
	for range 8 {
		u := <-s.runs.work
		if e, ok := o.row(u.it.row.ExecID); !ok || e.State != store.StateRunning || !e.StartedAt.Equal(u.it.started.Round(0)) {
			t.Fatalf("row %+v (found %v), want RUNNING since %v", e, ok, u.it.started)
		}
	}
}

// TestReloadedBatchStartsWithoutReads: attempts reloaded from SQLite after
// a spill carry their spec from the reload, so the write that starts them
// reads nothing (it read each one's spec, one statement per attempt).
func TestReloadedBatchStartsWithoutReads(t *testing.T) {
	cfg := offlineConfig(t, "edge-r")
	cfg.Workers, cfg.Queue.Size = 4, 4
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	s := o.s
	j := protocoltest.NewJob("edge-r", "noop", schedule.Spec{Asap: true}, map[string]int{"n": 1})
	j.Concurrency = 8
	s.runs.busy = cfg.Workers // hold dispatch until every run is stored
	for i := range 8 {
		o.apply(protocoltest.RunCmd(j, 1, start.Add(-time.Duration(8-i)*time.Second)))
	}
	if !s.runs.spilled {
		t.Fatal("8 runs with a queue of 4 did not spill")
	}
	// Run the 4 in memory to the end: the other 4 are reloaded.
	s.runs.busy = 0
	s.runs.pump()
	o.sync()
	for range 4 {
		u := <-s.runs.work
		must(t, o.st.Do(context.Background(), func(tx *store.Tx) error {
			_, err := tx.Finish(u.it.id, store.StateFinished, start, "success", nil)
			return err
		}))
		s.runs.busy--
		s.runs.done(u.it)
	}
	st0 := o.st.Stats()
	s.runs.pump() // reloads the 4 spilled attempts and starts them
	o.sync()
	if got := o.st.Stats().Statements - st0.Statements; got > 2 {
		t.Fatalf("starting 4 reloaded attempts took %d statements, want 2", got)
	}
	for range 4 {
		u := <-s.runs.work
		if u.it.row == nil || string(u.it.row.Spec) == "" {
			t.Fatalf("reloaded attempt %d handed to a worker without its spec", u.it.id)
		}
	}
}
