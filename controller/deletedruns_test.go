package controller

import (
	"testing"
	"time"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestDeleteJobCancelsUnplacedExecution: a one-shot job of a group no
// agent belongs to waits PENDING without an agent. Deleting the job
// cancels that execution (reason job_deleted): no run of it went out,
// and nothing else would ever end it. Before, it stayed PENDING in live
// state for good.
func TestDeleteJobCancelsUnplacedExecution(t *testing.T) {
	c := startController(t, testConfig(t, t.TempDir()))
	ctx := tctx(t)
	er := recordEvents(t, c.NATSURL())
	j, err := c.CreateJob(ctx, protocol.Job{Name: "nobody", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Group: "site=nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	// The list waits at most 2 s for the history index (historyReadWait):
	// a loaded -race run can take longer, so poll.
	var execs []protocol.Execution
	eventually(t, 20*time.Second, "the PENDING execution in the list", func() bool {
		execs, _, err = c.ListExecutions(ctx, ExecFilter{JobID: j.ID})
		return err == nil && len(execs) > 0
	})
	if len(execs) != 1 || execs[0].State != protocol.StatePending || execs[0].Agent != "" {
		t.Fatalf("executions of %s: %+v; want one PENDING without an agent", j.ID, execs)
	}
	id := execs[0].ExecID
	if err := c.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	v, err := c.ex.readExec(ctx, id)
	if err != nil || v.Rec == nil || v.Rec.State != protocol.StateCancelled || v.Rec.Reason != "job_deleted" {
		t.Fatalf("execution %s after the delete: %+v, %v; want CANCELLED, reason job_deleted", id, v.Rec, err)
	}
	er.Wait(t, id, protocol.StateCancelled)
	left := c.place.Waiting()
	if left != 0 {
		t.Errorf("%d executions still wait for an agent", left)
	}
}

// TestReloadCancelsUnsentRunOfDeletedJob: a PENDING execution on an agent
// whose run AX_CMD does not hold (lost in a crash before it went out),
// of a job deleted since, cannot be re-sent: the spec went with the job.
// The reload cancels it (reason job_deleted). A deleted job's execution
// whose run was sent is left PENDING: its agent holds the run and the
// spec, and runs it.
func TestReloadCancelsUnsentRunOfDeletedJob(t *testing.T) {
	cfg, c1, a := onExternalServer(t, nil)
	ctx := tctx(t)
	a.register()
	j, err := c1.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	sentExec := a.waitCommand("run", func(c protocol.Command) bool { return c.Kind == protocol.CmdRun && c.Run.Job.ID == j.ID }).Run.ExecID
	// A second execution of the same job whose run never went out: its
	// record alone, written a minute ago.
	at := c1.now().Add(-time.Minute)
	rec := pendingRecord(t, j.ID, at)
	if _, err := c1.ex.execs().Put(ctx, execstore.Version{}, rec); err != nil {
		t.Fatal(err)
	}
	lost := rec.ExecID
	leaveDeadMark(t, cfg, at.Add(-time.Second)) // the process the crash killed
	if err := c1.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}

	c2, reload := restartForReload(t, cfg)
	if reload["deleted_jobs_runs_cancelled"] != float64(1) {
		t.Errorf("reload %v: want 1 execution of a deleted job cancelled", reload)
	}
	if v, err := c2.ex.readExec(ctx, lost); err != nil || v.Rec == nil || v.Rec.State != protocol.StateCancelled || v.Rec.Reason != "job_deleted" {
		t.Errorf("execution %s whose run was lost, after the reload: %+v, %v; want CANCELLED, reason job_deleted", lost, v.Rec, err)
	}
	if v, err := c2.ex.readExec(ctx, sentExec); err != nil || v.Rec == nil || v.Rec.State != protocol.StatePending {
		t.Errorf("execution %s whose run was sent, after the reload: %+v, %v; want kept PENDING", sentExec, v.Rec, err)
	}
}
