package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestCreateOneShotWritesTogether: CreateJob of a one-shot job whose
// record is not held (createheld.go: here, one delayed by an hour) writes
// the execution record without waiting for the job record's ack (both are
// in flight together), and when the job's write fails it removes the
// record again and answers with the error: no execution, no run, no event
// of a job that was not stored. The job's write is made to fail by a
// maximum message size on ax_jobs' stream smaller than the job.
func TestCreateOneShotWritesTogether(t *testing.T) {
	c := newTestController(t)
	er := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)
	execsBefore := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs))
	jobs, err := c.js.Stream(ctx, streams.KVStream(protocol.BucketJobs))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobs.CachedInfo().Config
	cfg.MaxMsgSize = 16
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	later := protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"}, Target: protocol.Target{Agent: "edge-1"}}
	if _, err := c.CreateJob(ctx, later); err == nil {
		t.Fatal("CreateJob succeeded with a job store that refuses it")
	}
	// The record and its removal (a purge marker): written at once, removed.
	if got := streamLastSeq(t, c, streams.KVStream(protocol.BucketExecs)); got != execsBefore+2 {
		t.Errorf("ax_execs stream at %d after the failed create, want %d (the record, written alongside the job, and its removal)", got, execsBefore+2)
	}
	n := 0
	if err := c.ex.scanExecs(ctx, func(*execRecord, uint64) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d execution records after the failed create, want 0", n)
	}

	cfg.MaxMsgSize = -1
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	j, err := c.CreateJob(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	execID := protocol.ExecID(j.ID, j.CreatedAt.Add(time.Hour))
	if r := readRecord(t, c, execID); r.State != protocol.StatePending {
		t.Errorf("execution after CreateJob: %s, want PENDING", r.State)
	}
	run := a.waitCommand("run of "+execID, isRun(execID, 1))
	for _, cmd := range a.commands() {
		if cmd.Kind == protocol.CmdRun && cmd.Run.ExecID != execID {
			t.Errorf("a run of %s, the execution of the job not stored", cmd.Run.ExecID)
		}
	}
	if run.Run.Job.ID != j.ID {
		t.Errorf("run of job %s, want %s", run.Run.Job.ID, j.ID)
	}
	// The PENDING event is held (eventhold.go): not stored when CreateJob
	// returned, and stored by a list made then, which shows the execution
	// (read from the stream itself: the recorder's consumer gets it later,
	// on its own time); first.
	if storedEvent(t, c.js, protocol.StatePending, j.ID) {
		t.Errorf("PENDING event of %s stored when CreateJob returned, want it held", execID)
	}
	list, _, err := c.ListExecutions(ctx, ExecFilter{JobID: j.ID})
	if err != nil || len(list) != 1 || list[0].ExecID != execID || list[0].State != protocol.StatePending {
		t.Fatalf("list right after the create: %+v, %v", list, err)
	}
	if !storedEvent(t, c.js, protocol.StatePending, j.ID) {
		t.Errorf("PENDING event of %s not in %s after a list", execID, protocol.StreamEvents)
	}
	testutil.Eventually(t, 10*time.Second, "the first event of "+execID, func() bool { return len(er.Path(execID)) > 0 })
	if p := er.Path(execID); p[0] != protocol.StatePending {
		t.Errorf("events of %s: %v, want PENDING first", execID, p)
	}
}

func streamLastSeq(t *testing.T, c *Controller, name string) uint64 {
	t.Helper()
	st, err := c.js.Stream(tctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// TestReloadRemovesExecsOfJobsNeverStored: a PENDING execution whose job
// was never stored (createOneShot cut short by a crash after the record's
// write and before the job's) is removed by the next controller's reload,
// without a run or an event; a younger one (a create that may still be in
// flight) and the PENDING execution of a deleted job are kept.
func TestReloadRemovesExecsOfJobsNeverStored(t *testing.T) {
	cfg, c1, a := onExternalServer(t, nil)
	ctx := tctx(t)
	a.register()
	deleted, err := c1.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	delExec := a.waitCommand("run", func(c protocol.Command) bool { return c.Kind == protocol.CmdRun && c.Run.Job.ID == deleted.ID }).Run.ExecID
	if err := c1.DeleteJob(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}
	orphan := func(age time.Duration, rnd uint32) string {
		at := c1.now().Add(-age)
		jobID := protocol.NewJobID(cfg.Node, at, rnd)
		rec := pendingRecord(t, jobID, at)
		if _, err := c1.ex.execs().Put(ctx, execstore.Version{}, rec); err != nil {
			t.Fatal(err)
		}
		return rec.ExecID
	}
	old, young := orphan(time.Minute, 1), orphan(0, 2)
	leaveDeadMark(t, cfg, c1.now().Add(-2*time.Minute)) // the process whose create the crash cut short
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}

	er := recordEvents(t, cfg.NATS.URL)
	c2, reload := restartForReload(t, cfg)
	if reload["orphans_removed"] != float64(1) {
		t.Errorf("reload %v: want 1 orphan removed", reload)
	}
	if v, err := c2.ex.readExec(ctx, old); err != nil || v.Rec != nil {
		t.Errorf("execution %s of a job never stored after the reload: %+v, %v; want removed", old, v.Rec, err)
	}
	for _, id := range []string{young, delExec} {
		if v, err := c2.ex.readExec(ctx, id); err != nil || v.Rec == nil || v.Rec.State != protocol.StatePending {
			t.Errorf("execution %s after the reload: %+v, %v; want kept PENDING", id, v.Rec, err)
		}
	}
	if _, err := c2.kv.Jobs.History(ctx, deleted.ID); errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("deleted job %s has no history: the control case tests nothing", deleted.ID)
	}
	for _, cmd := range a.commands() {
		if cmd.Kind == protocol.CmdRun && cmd.Run.ExecID == old {
			t.Errorf("a run of %s was sent", old)
		}
	}
	if p := er.Path(old); len(p) != 0 {
		t.Errorf("events of %s: %v, want none", old, p)
	}
}

// TestCreateJobDrawsAgainWhenIDTaken: two creates in one second that draw
// the same random part get the same job id; the second one's store finds
// the key and CreateJob draws again instead of failing the client's
// request. Both paths of the create are covered: a one-shot job (written
// with its execution) and a periodic one. The ids are drawn from a fixed
// sequence on a stopped clock.
func TestCreateJobDrawsAgainWhenIDTaken(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	c := startController(t, cfg)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)
	draws := []uint32{7, 7, 8, 9, 9, 9, 10}
	c.idRand = func() uint32 { r := draws[0]; draws = draws[1:]; return r }

	first, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatalf("second one-shot create with a taken id: %v", err)
	}
	if second.ID == first.ID || second.ID != protocol.NewJobID(cfg.Node, second.CreatedAt, 8) {
		t.Fatalf("second job id %s (first %s), want the second draw's", second.ID, first.ID)
	}
	every := protocol.Job{Name: "tick", Handler: "noop", Schedule: schedule.Spec{Every: "1m"}, Target: protocol.Target{Agent: "edge-1"}}
	p1, err := c.CreateJob(ctx, every)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.CreateJob(ctx, every)
	if err != nil {
		t.Fatalf("second periodic create with a taken id: %v", err)
	}
	if p2.ID != protocol.NewJobID(cfg.Node, p2.CreatedAt, 10) || p1.ID == p2.ID {
		t.Fatalf("periodic job ids %s, %s, want the draws 9 and 10", p1.ID, p2.ID)
	}
	for _, id := range []string{first.ID, second.ID, p1.ID, p2.ID} {
		if _, err := c.GetJob(ctx, id); err != nil {
			t.Errorf("GetJob(%s): %v", id, err)
		}
	}
	// Each one-shot job has its one execution; the taken try left none.
	// (Their records are held by the creates, createheld.go, and the fake
	// clock never ends the hold: a list stores them.)
	c.ex.publishHeld(ctx, true)
	n := 0
	if err := c.ex.scanExecs(ctx, func(*execRecord, uint64) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d execution records, want 2 (one per one-shot job)", n)
	}
}
