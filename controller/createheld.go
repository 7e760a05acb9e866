package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/placement"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// A one-shot job pinned to an agent and due at once (the dispatch of an
// IoT command) is created with one record write fewer: its execution's
// PENDING record is not written at the create but held in memory with its
// PENDING event (eventhold.go), and most of the time never written as
// such. The agent runs the attempt within milliseconds and its first
// report's lane creates the record in the state the report brings
// (PENDING → TRIGGERED → RUNNING → SUCCESS in one write, a compare-and-set
// on "no record yet"), which drops the held one. A record still held two
// ticks later (0.5–1 s: an agent offline or slow) is written then, as
// PENDING, with its event. On the dispatch benchmark that is one stored
// message, its ack and its share of ax_execs' subject index fewer per
// execution (bench/JOURNAL.md, stop 46).
//
// The create writes the job (its ack awaited), then the run command (its
// ack awaited), then answers; the record is held before the run goes out.
// Every reader of the record sees it as if it were stored:
//
//   - GetExecution answers from the hold; readExec (operator cancel and
//     retry, the changes made by applyExec) stores a held record first
//     (storeHeldRecord), and so do an update, a pause and a delete of the
//     job (a deleted or paused job's run that is out goes on to its end,
//     and after a crash the reload makes records only for live, unpaused
//     jobs); a list stores and publishes everything held (publishHeld),
//     and so do a reload, a store loss's re-send of runs and a clean stop.
//   - The lane of the first report takes the record from the ingest's
//     created records (controller/ingest, NoteCreated with revision 0:
//     its write is the create). A lane that does not have it (another
//     replica took the shard over, or the created records were full) reads
//     ax_execs; when the record is not there either, the report of attempt
//     1 of a pinned one-shot job from its agent, whose time has come, may
//     create it (controller/ingest reportauth.go), as a periodic fire's
//     first report does.
//   - Whichever of the hold's write and the lane's comes second fails its
//     compare-and-set: the hold's then drops the record (the lane's is
//     newer), the lane's reads the record and applies the report to it.
//     A hold's write the store refuses for another reason is held again
//     and tried at the next due tick (eventHold.requeue).
//
// Crash (kill -9) after the run was stored and before the record was: the
// create's write op stays open until the record is stored (writemark), so
// the process's mark stays before the job, and the reload of the job's
// shard treats it as a create cut short: createMissingOneShots writes the
// PENDING record and sends the run again (the same Msg-Id; an agent runs
// an attempt once). A first report that comes before that reload creates
// the record itself, as above; one that comes after applies to the
// PENDING record.
//
// Only pinned jobs take this path: a group job's agent is picked at the
// create (rendezvous over the members online then), and a reload must not
// pick another one than the run was sent to. Delayed jobs do not either:
// their report would not come within the hold.

// oneShotExecID returns the exec id of one-shot job j's execution as a
// pinned job has it (a broadcast's executions have other ids, and are
// never held); false for a periodic job or one without a fire.
func oneShotExecID(j protocol.Job) (string, bool) {
	if j.Periodic() {
		return "", false
	}
	s, err := schedule.Parse(j.Schedule, j.CreatedAt)
	if err != nil {
		return "", false
	}
	at, ok := s.Next(time.Time{})
	if !ok {
		return "", false
	}
	return protocol.ExecID(j.ID, at), true
}

// holdsRecord reports whether the create of one-shot job j, its one fire
// at at placed as ps, holds its execution's record (see above): pinned, one
// placement on its agent, due within a hold tick.
func (c *jobService) holdsRecord(j protocol.Job, at time.Time, ps []placement.Placement) bool {
	return j.Target.Agent != "" && len(ps) == 1 && ps[0].Agent == j.Target.Agent && ps[0].Shard == nil &&
		!at.After(c.now().Add(c.cfg.heldTick))
}

// createOneShotHeld is createOneShot's path for a job whose record is held
// (holdsRecord): the job is stored, then m's run is sent with its record
// and PENDING event held, and CreateJob answers.
func (c *jobService) createOneShotHeld(ctx context.Context, j protocol.Job, data []byte, m oneShotMade) (protocol.Job, error) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		return protocol.Job{}, fmt.Errorf("create job: %w: %w", ErrNotReady, err)
	}
	// Made to the end even when the caller goes away (as createOneShot).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, createWriteWait)
	defer wcancel()
	fut, err := c.publishNewJob(j, data)
	var rev uint64
	if err == nil {
		rev, err = waitAck(wctx, fut)
	}
	if err != nil {
		return protocol.Job{}, newJobErr(op, err)
	}
	c.newJobStored(ctx, j, rev)
	// Revision 0: the lane's write of the first report is the create.
	c.ingest.NoteCreated(execstore.Version{Rec: m.next})
	c.dispatchMade(ctx, j, data, []oneShotMade{m}, true)
	return j, nil
}
