package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// createWriteWait bounds how long a create waits for the acks of its
// pipelined writes (the job record and its execution records).
const createWriteWait = 10 * time.Second

// orphanExecAfter is how old a PENDING execution whose job was never
// stored must be before a reload removes it (repairOrphanExecs): younger
// ones may belong to a create still waiting for its job's ack. Far above
// createWriteWait, past which such a create gives up.
const orphanExecAfter = 30 * time.Second

// oneShotMade is one execution createOneShot writes: the record, the
// effects of its Create and the write in flight.
type oneShotMade struct {
	next *execRecord
	effs []execution.Effect
	put  *execstore.Pending
	rev  uint64
	err  error
}

// createOneShot is CreateJob's path for a one-shot job that gets its
// executions at once (not paused, one fire, placed, on the replica that
// sends its commands: the driver's Local). A job pinned to an agent and due
// at once takes createOneShotHeld (createheld.go: its record is held, and
// the crash argument is there). For any other: the job record and
// its PENDING execution records are published together and their acks
// awaited together (one round trip instead of one per record), then the
// run commands and the PENDING events go out (the second round trip), and
// only then does CreateJob reply. ok is false when the job does not take
// this path (nothing was written): CreateJob stores it the other way.
//
// Crash safety, for a crash at any point (kill -9 of the controller):
//
//   - A run command is published only after the job record and the
//     execution record it belongs to are acknowledged, so a run is never
//     durable before its record (an agent never runs an execution the
//     controller does not know).
//   - The reply comes after every write it reports, so a client that got
//     a job id finds the job and its execution.
//   - Job stored, execution not (or not all): the reload of the job's
//     shard creates the missing execution of a one-shot job
//     (reloadExecutions), as when a crash cut a create short before.
//   - Both stored, run not sent: the reload re-sends the run of a PENDING
//     execution that AX_CMD does not hold (sentruns.go); the PENDING event
//     is restored from the record (repairHistory).
//   - Execution stored, job not (the acks can come in either order): the
//     client got an error, no run was sent; the reload removes such a
//     record once it is older than orphanExecAfter (repairOrphanExecs).
//     Without the crash, a failed job write retires the records at once.
func (c *jobService) createOneShot(ctx context.Context, j protocol.Job, data []byte) (protocol.Job, bool, error) {
	// Only where this replica sends the job's commands (the driver's
	// Local); elsewhere the job alone is stored and the owner of its shard
	// makes the executions (onJobChanged).
	if j.Periodic() || j.Paused || !c.driver.Local(j.ID) {
		return protocol.Job{}, false, nil
	}
	s, err := schedule.Parse(j.Schedule, j.CreatedAt)
	if err != nil {
		return protocol.Job{}, false, nil
	}
	at, ok := s.Next(time.Time{})
	if !ok {
		return protocol.Job{}, false, nil
	}
	ps, err := c.place.Placements(j, at)
	if err != nil {
		return protocol.Job{}, false, nil // stored the other way, which logs why it has no execution
	}
	env := execution.Env{Now: c.now()}
	made := make([]oneShotMade, len(ps))
	for i, p := range ps {
		ev := execution.Create{ExecID: p.ExecID, JobID: j.ID, Agent: p.Agent, ScheduledAt: at, Shard: p.Shard, Reason: "scheduled"}
		next, effs, err := execution.Apply(nil, ev, env)
		if err != nil || next == nil {
			return protocol.Job{}, false, nil
		}
		made[i] = oneShotMade{next: next, effs: effs}
	}
	if c.holdsRecord(j, at, ps) {
		out, err := c.createOneShotHeld(ctx, j, data, made[0])
		return out, true, err
	}
	// The writes and their effects are one write op (writemark).
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		return protocol.Job{}, true, fmt.Errorf("create job: %w: %w", ErrNotReady, err)
	}
	// The writes are made to the end even when the caller goes away: what
	// is stored must get its commands (as onJobChanged).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, createWriteWait)
	defer wcancel()
	execs := c.ex.execs()
	jfut, jerr := c.publishNewJob(j, data)
	for i := range made {
		made[i].put = execs.PutAsync(execstore.Version{}, made[i].next)
	}
	var jrev uint64
	if jerr == nil {
		jrev, jerr = waitAck(wctx, jfut)
	}
	failed := false
	for i := range made {
		made[i].rev, made[i].err = made[i].put.Wait(wctx)
		failed = failed || made[i].err != nil
	}
	if jerr != nil {
		for _, m := range made {
			if m.err == nil {
				if _, err := execs.Retire(ctx, m.next.ExecID, m.rev); err != nil {
					op.Fail() // a record left without its job: the reload's orphan check
					c.log.Warn("remove the execution of a job not stored", "exec", m.next.ExecID, "err", err)
				}
			}
		}
		return protocol.Job{}, true, newJobErr(op, jerr)
	}
	c.newJobStored(ctx, j, jrev)
	if failed {
		// A record not stored: create the executions the general way,
		// which keeps those stored and sends their runs.
		if _, err := c.ex.createRuns(ctx, j, at, "scheduled", 0); err != nil {
			c.log.Error("dispatch one-shot job", "job", j.ID, "err", err)
		}
		return j, true, nil
	}
	for _, m := range made {
		c.ingest.NoteCreated(execstore.Version{Rec: m.next, Rev: m.rev})
	}
	c.dispatchMade(ctx, j, data, made, false)
	return j, true, nil
}

// publishNewJob publishes job j (encoded as data) to ax_jobs as a create
// (compare-and-set on no message for its key), without waiting for the ack.
func (c *jobService) publishNewJob(j protocol.Job, data []byte) (jetstream.PubAckFuture, error) {
	m := &nats.Msg{Subject: streams.KVSubject(protocol.BucketJobs, j.ID), Data: data, Header: nats.Header{}}
	return c.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(0), jetstream.WithStallWait(asyncStallWait))
}

// newJobErr is CreateJob's error for a failed publishNewJob: the id taken
// (jetstream.ErrKeyExists: CreateJob draws another), or a store error,
// which fails op (the job may be stored after all, without its execution).
func newJobErr(op *writemark.Op, err error) error {
	if streams.IsWrongLastSeq(err) {
		err = jetstream.ErrKeyExists
	} else {
		op.Fail()
	}
	return fmt.Errorf("create job: store: %w", err)
}

// newJobStored notes job j, stored at rev by a create, in the job cache and
// the placement.
func (c *jobService) newJobStored(ctx context.Context, j protocol.Job, rev uint64) {
	c.jobs.Put(j, rev)
	c.log.Debug("job created", "job", j.ID, "name", j.Name, "handler", j.Handler, "schedule", j.Schedule.Kind(), "generation", j.Generation)
	c.place.AssignChange(ctx, nil, &j, rev)
}

// dispatchMade executes the effects of the Creates createOneShot stored
// (or holds, unstored: createheld.go):
// the run commands are published asynchronously, all of them before any
// ack is awaited (a synchronous publish per run cost a round trip and a
// reply subscription each), then it waits for their acks
// (createWriteWait). The PENDING events are held (eventhold.go): most of
// these executions move on within a second, and their next event says
// what it would; a list made after the reply publishes what is held
// first, so it shows the executions. jobJSON is the job as stored
// (json.Marshal(j)), which the run commands carry.
func (c *jobService) dispatchMade(ctx context.Context, j protocol.Job, jobJSON []byte, made []oneShotMade, unstored bool) {
	type runSent struct {
		rec *execRecord
		fut jetstream.PubAckFuture
	}
	var runs []runSent
	var evs []jetstream.PubAckFuture
	for _, m := range made {
		rest := make([]execution.Effect, 0, len(m.effs))
		var send []execution.SendRun
		for _, e := range m.effs {
			switch e := e.(type) {
			case execution.SendRun:
				send = append(send, e)
			case execution.Transitioned:
				tr := transition{from: e.T.From, to: e.T.To, reason: e.T.Reason}
				if !holdsPending(tr) {
					rest = append(rest, e)
					continue
				}
				// Held (eventhold.go); the op stays open until it is
				// published or superseded.
				c.ex.noteTransition(&e.Snapshot, tr)
				release := func(bool) {}
				if op := writemark.From(ctx); op != nil {
					release = op.Hold()
				}
				snap := e.Snapshot
				c.ex.evHold.hold(&snap, tr, unstored, release)
			default:
				rest = append(rest, e)
			}
		}
		futs, _, _ := c.ex.startEffects(ctx, m.next, &j, rest) // no command among them: no error
		evs = append(evs, futs...)
		for _, r := range send {
			fut, err := c.publishRunAsync(j, jobJSON, m.next, r.Attempt, r.RunAt)
			if err != nil {
				writemark.From(ctx).Fail()
				c.log.Error("dispatch one-shot job", "job", j.ID, "err", fmt.Errorf("send run %s: %w", m.next.ExecID, err))
				continue
			}
			runs = append(runs, runSent{rec: m.next, fut: fut})
		}
	}
	wctx, cancel := context.WithTimeout(ctx, createWriteWait)
	defer cancel()
	for _, r := range runs {
		if _, err := waitAck(wctx, r.fut); err != nil {
			// Left PENDING: the reload of its shard re-sends it (sentruns.go),
			// since the op's mark stays before it.
			writemark.From(ctx).Fail()
			c.log.Error("dispatch one-shot job", "job", j.ID, "err", fmt.Errorf("send run %s: %w", r.rec.ExecID, err))
			continue
		}
		c.m.commands.WithLabelValues(string(protocol.CmdRun)).Inc()
	}
	c.ex.awaitEvents(ctx, evs)
}

// publishRunAsync publishes the run command of attempt of rec (as sendRun)
// without waiting for its ack; jobJSON, json.Marshal(job), is the job's
// part of it (protocol.EncodeRun).
func (c *jobService) publishRunAsync(job protocol.Job, jobJSON []byte, rec *execRecord, attempt int, runAt time.Time) (jetstream.PubAckFuture, error) {
	cmd := protocol.Command{V: protocol.Version, Kind: protocol.CmdRun, Agent: rec.Agent, IssuedAt: c.now(), Run: &protocol.Run{
		Job: job, ExecID: rec.ExecID, Attempt: attempt, RunAt: runAt, Epoch: rec.Epoch,
	}}
	data, err := protocol.EncodeRun(cmd, jobJSON)
	if err != nil {
		return nil, err
	}
	return c.js.PublishAsync(protocol.CommandSubject(cmd.Agent), data, jetstream.WithMsgID(runMsgID(rec, attempt)), jetstream.WithStallWait(asyncStallWait))
}

// waitAck returns the sequence fut was stored at, or why it was not.
func waitAck(ctx context.Context, fut jetstream.PubAckFuture) (uint64, error) {
	select {
	case ack := <-fut.Ok():
		return ack.Sequence, nil
	case err := <-fut.Err():
		return 0, err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// repairOrphanExecs removes the PENDING first attempts, among recs (read
// by reloadExecutions), whose job was never stored: left by a crash of
// createOneShot after the execution record's write and before the job's.
// No run of such an execution was sent (runs go out after both writes),
// and its creator answered with an error, so nothing waits for it. A
// record younger than orphanExecAfter, whose run AX_CMD holds (sent), or
// whose job has any message in ax_jobs (a deleted job, whose executions
// run to their end) is left alone. It returns the ids it removed, and
// false when a record could not be judged (too young, or ax_jobs not
// read) or removed.
func (c *reloader) repairOrphanExecs(ctx context.Context, recs []*execRecord, revs map[string]uint64, sent map[string]bool) (removed map[string]bool, ok bool) {
	removed, ok = map[string]bool{}, true
	for _, r := range recs {
		if r.State != protocol.StatePending || r.Attempt > 1 || sent[runMsgID(r, r.Attempt)] {
			continue
		}
		if c.now().Sub(r.UpdatedAt) < orphanExecAfter {
			ok = false // not judged yet: a later reload (the marks' sweep) looks again
			continue
		}
		if c.jobs.Has(r.JobID) {
			continue
		}
		if _, err := c.kv.Jobs.History(ctx, r.JobID); !errors.Is(err, jetstream.ErrKeyNotFound) {
			ok = ok && err == nil
			continue // the job exists or existed, or ax_jobs could not be read
		}
		if _, err := c.ex.execs().Retire(ctx, r.ExecID, revs[r.ExecID]); err != nil {
			ok = false
			c.log.Warn("remove execution of a job never stored", "exec", r.ExecID, "job", r.JobID, "err", err)
			continue
		}
		c.place.ForgetWaiting(r.ExecID)
		removed[r.ExecID] = true
		c.log.Warn("removed execution of a job never stored (a create cut short)", "exec", r.ExecID, "job", r.JobID)
	}
	return removed, ok
}
