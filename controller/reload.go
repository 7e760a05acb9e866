package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// reloadExecutions runs when this replica acquires shards: for the
// executions of their jobs, it re-arms the retry timer of every
// RETRY_WAITING execution (overdue ones fire at once), re-sends the run
// command of PENDING ones that AX_CMD does not hold (sentruns.go),
// remembers those waiting for an agent, creates the execution of a
// one-shot job whose creation was cut short by a crash, restores the
// events a crash kept from the history (historyrepair.go), and re-sends
// the assignments of the periodic jobs changed after the write marks
// (reassignChanged).
//
// Its cost follows the live executions of the shards: one scan of
// ax_execs (execscan.go; reloadScan keeps whole only the records it looks
// at again, so 300,000 PENDING ones older than the write marks leave a
// key each), or none when the history index stands in for the records
// written long before the marks (reloadindex.go: those are then not read
// at all, and the log's pending counts only the runs read), then the read
// of AX_CMD's run ids and the check of the one-shot jobs on two more
// goroutines while this one checks the
// history (the three are independent; with 300,000 PENDING one-shots each
// takes about a second); the re-sends and the orphan check wait for the
// run ids. Only the records written at or after the oldest write mark of
// any replica (writemarks.go), and those of versions without marks, are
// checked for a lost command or event: the others were written with
// their effects. The marks of processes that ended are then recorded as
// checked on these shards, and removed once checked on every shard.
func (c *reloader) reloadExecutions(ctx context.Context, shards map[int]bool) error {
	if c.hooks.beforeReload != nil {
		c.hooks.beforeReload(ctx)
	}
	return c.reloadShards(ctx, shards)
}

// reloadShards is reloadExecutions without the test hook: the sweep of
// ended processes' marks calls it too (writemarks.go).
func (c *reloader) reloadShards(ctx context.Context, shards map[int]bool) error {
	in := func(jobID string) bool { n := c.own.ShardOf(jobID); return shards[n] && c.own.Owns(n) }
	// Records this process's creates hold (createheld.go) are stored
	// first, so that the scan finds them.
	c.ex.publishHeld(ctx, true)
	marks, merr := c.readMarks(ctx)
	if merr != nil {
		c.log.Warn("reading the write marks failed; checking every execution's command and events", "err", merr)
	}
	floor, hasFloor := marksFloor(marks, c.cfg.marksMargin)
	verified, verifiedRev, verr := c.readVerified(ctx)
	if verr != nil {
		c.log.Warn("reading how far earlier versions' records are checked failed; checking them all", "err", verr)
	}
	// An untracked record (an earlier version's) was checked by a reload
	// of every shard whose scan began after it (less the margin).
	untrackedChecked := func(r *execRecord) bool {
		return verr == nil && !verified.Through.IsZero() && r.UpdatedAt.Before(verified.Through.Add(-c.cfg.marksMargin))
	}
	mayLack := func(r *execRecord) bool {
		if !r.Tracked {
			return !untrackedChecked(r)
		}
		return merr != nil || !hasFloor || !r.UpdatedAt.Before(floor)
	}
	scanned := c.now()
	var s reloadScanned // s.indexed when the history index stood in
	if since, ok := c.indexReloadSince(merr, floor, hasFloor, verified, verr, scanned); ok {
		var err error
		if s, err = c.reloadFromIndex(ctx, in, mayLack, since); err != nil {
			return err
		}
	}
	if !s.indexed {
		var err error
		if s, err = c.reloadScan(ctx, in, mayLack); err != nil {
			return err
		}
	}
	liveN := len(s.live) + s.unchecked
	if s.indexed {
		liveN = indexedLive
	}
	var (
		sent    map[string]bool
		sentErr error
		sentCh  = make(chan struct{})
	)
	go func() {
		defer close(sentCh)
		look := append(s.pending[:len(s.pending):len(s.pending)], s.retrySent...)
		if len(look) == 0 {
			return
		}
		oldest := look[0].UpdatedAt
		for _, r := range look {
			if r.UpdatedAt.Before(oldest) {
				oldest = r.UpdatedAt
			}
		}
		sent, sentErr = c.sentRuns(ctx, oldest, len(look))
	}()
	missing, missingOK := 0, false
	var remade []remadeRun
	missingCh := make(chan struct{})
	go func() {
		defer close(missingCh)
		// A one-shot job never changed (generation 1) and created before
		// every write mark got its executions in the op that created it.
		made := func(b jobcache.Brief) bool {
			return merr == nil && hasFloor && b.Generation == 1 && b.CreatedAt.Before(floor)
		}
		missing, remade, missingOK = c.createMissingOneShots(ctx, in, s.seen, made)
	}()
	// The history of the executions whose job is known; a jobless PENDING
	// one may be an orphan, removed below, which must not enter it.
	withJob := make([]*execRecord, 0, len(s.live)-len(s.jobless))
	for _, r := range s.live {
		if _, ok := s.joblessRev[r.ExecID]; !ok {
			withJob = append(withJob, r)
		}
	}
	restored, herr := c.repairHistory(ctx, shards, withJob, liveN)
	<-missingCh
	<-sentCh
	sentKnown := sentErr == nil
	if !sentKnown {
		c.log.Warn("reading the run commands AX_CMD holds failed; re-sending every PENDING run and sent retry", "err", sentErr)
	}
	retriesHeld := c.armSentRetries(s.retrySent, sent)
	if !c.sendRemadeRuns(ctx, remade) {
		missingOK = false
	}
	resent, unread := 0, 0
	for _, r := range s.pending {
		if sent[runMsgID(r, r.Attempt)] {
			continue
		}
		j, ok, err := c.jobsvc.knownJob(ctx, r.JobID)
		if err != nil {
			// Its job could not be read: not re-sent now, and the marks
			// stay unchecked (a later sweep looks again).
			unread++
			continue
		}
		if !ok {
			continue
		}
		resent++
		if err := c.ex.sendRun(ctx, j, r, r.Attempt, r.ScheduledAt); err != nil {
			return fmt.Errorf("re-send run %s: %w", r.ExecID, err)
		}
	}
	if unread > 0 {
		c.log.Warn("PENDING runs not re-sent: their jobs could not be read", "runs", unread)
	}
	orphans, checkedAll := 0, unread == 0
	jobless := s.jobless
	if sentKnown && len(jobless) > 0 {
		removed, ok := c.repairOrphanExecs(ctx, jobless, s.joblessRev, sent)
		checkedAll = checkedAll && ok
		orphans = len(removed)
		kept := jobless[:0]
		for _, r := range jobless {
			if !removed[r.ExecID] {
				kept = append(kept, r)
			}
		}
		jobless = kept
	}
	if herr == nil && len(jobless) > 0 {
		n, err := c.repairHistory(ctx, shards, jobless, liveN)
		restored, herr = restored+n, err
	}
	if herr != nil {
		c.log.Warn("restore events missing from the history", "err", herr)
	}
	cancelled := 0
	if sentKnown {
		var ok bool
		cancelled, ok = c.cancelUnsentOfDeleted(ctx, jobless, sent)
		checkedAll = checkedAll && ok
	}
	reassigned, ok := c.reassignChanged(ctx, in, merr == nil, floor, hasFloor)
	checkedAll = checkedAll && ok
	// The ended processes' marks count as checked on these shards only
	// when every check above could be made and every repair succeeded.
	dropped, verifiedNow := 0, false
	if checkedAll && missingOK && merr == nil && sentKnown && herr == nil {
		dropped = c.coverMarks(ctx, marks, shards)
		if verr == nil && len(shards) == c.cfg.Shards {
			// None: no record of an earlier version in the scan, or in
			// the records read since the marks when the index stood in
			// (which it does only after a scan that found none).
			verifiedNow = c.storeVerified(ctx, verified, verifiedRev, scanned, s.untracked == 0)
		}
	}
	c.log.Info("executions reloaded", "shards", len(shards), "retry_waiting", s.retries, "pending", s.pendingAll, "pending_resent", resent,
		"retries_sent_held", retriesHeld, "one_shot_recreated", missing, "orphans_removed", orphans, "events_restored", restored, "deleted_jobs_runs_cancelled", cancelled, "assignments_resent", reassigned,
		"checked", len(s.live), "unchecked", s.unchecked, "write_marks", len(marks), "dead_marks_removed", dropped,
		"untracked_verified", verifiedNow, "from_index", s.indexed)
	return nil
}

// reassignLookback is how far back a reload re-sends the assignments of
// changed periodic jobs when it could not read the write marks.
const reassignLookback = 10 * time.Minute

// reassignChanged re-sends the assignments of the periodic jobs of the
// reloaded shards (in) that changed at or after floor: a process killed
// between a job's write and its commands left the job stored and its
// agents without it (a change before every write mark went out with its
// commands: the create, update, pause, resume or delete of a job is one
// write op with its dispatch). Without marks (hasFloor false, every
// process before ended cleanly) nothing is re-sent; when the marks could
// not be read (marksRead false), the changes of the last
// reassignLookback are. It returns how many jobs it re-sent, and false
// when a command could not be published. A lost unassign heals through
// the agent's own refused fires (controller/ingest/stray.go).
func (c *reloader) reassignChanged(ctx context.Context, in func(jobID string) bool, marksRead bool, floor time.Time, hasFloor bool) (int, bool) {
	since := floor
	switch {
	case !marksRead:
		since = c.now().Add(-reassignLookback)
	case !hasFloor:
		return 0, true
	}
	js := c.jobs.ChangedPeriodic(since, in)
	if len(js) == 0 {
		return 0, true
	}
	return c.place.Reassign(ctx, js, "reload: changed after the write marks")
}

// cancelUnsentOfDeleted cancels the PENDING executions of deleted jobs
// (among jobless) whose run AX_CMD does not hold (sent): the run was lost
// in a crash before it went out, and the job's spec went with the delete,
// so it can be neither re-sent nor run. A record younger than
// orphanExecAfter (its run may be on its way) or older than AX_CMD keeps
// commands (its run may have aged out of the stream) is left alone, and so
// is an unplaced one (the placement's PlaceWaiting takes those). It returns how many it
// cancelled, and false when a cancel failed.
func (c *reloader) cancelUnsentOfDeleted(ctx context.Context, jobless []*execRecord, sent map[string]bool) (int, bool) {
	n, ok := 0, true
	for _, r := range jobless {
		age := c.now().Sub(r.UpdatedAt)
		if r.Agent == "" || sent[runMsgID(r, r.Attempt)] || age > streams.DefaultCommandMaxAge-time.Hour {
			continue
		}
		if age < orphanExecAfter {
			ok = false // not judged yet: a later reload (the marks' sweep) looks again
			continue
		}
		done, err := c.ex.cancelDeletedJobRun(ctx, r.ExecID, r.JobID, true)
		if err != nil {
			ok = false
			c.log.Warn("cancel execution of a deleted job", "exec", r.ExecID, "job", r.JobID, "err", err)
		}
		if done {
			n++
		}
	}
	return n, ok
}

// armSentRetries re-arms the retry timers of rs, RETRY_WAITING executions
// whose next attempt's run was sent, except those whose run AX_CMD holds
// (sent, nil when it could not be read: every one is re-armed). Their
// agent has the run or will read it; a timer would send it again (overdue:
// at once), and AX_CMD keeps no de-duplication window
// (streams.CommandDuplicates): the copy would be stored, and an agent
// that had run the attempt and pruned it since (store.retention, while
// this controller was down or its report not applied yet) would run it a
// second time. Such an execution stays RETRY_WAITING until its agent
// reports the attempt, as one does whose run was sent by a live replica;
// a group job's lease moving on ends it (execution.AgentLost). It returns
// how many it left without a timer.
func (c *reloader) armSentRetries(rs []*execRecord, sent map[string]bool) int {
	held := 0
	for _, r := range rs {
		if sent[runMsgID(r, r.Sent)] {
			held++
			continue
		}
		c.retries.schedule(r.ExecID, r.JobID, r.Attempt, r.NextAttemptAt)
	}
	return held
}

// remadeRun is a PENDING execution createMissingOneShots made again, whose
// run it did not send.
type remadeRun struct {
	job protocol.Job
	rec *execRecord
}

// createMissingOneShots creates the execution of each live one-shot job
// of the shards (in) whose execution is neither in ax_execs (seen) nor in
// the history: its creation was cut short by a crash. Jobs for which made
// holds are known to have theirs (the write marks) and are not looked at.
// It returns how many it created, the PENDING ones among them placed on an
// agent, whose runs it did not send (sendRemadeRuns sends those AX_CMD
// lacks), and false when one could not be judged or created.
func (c *reloader) createMissingOneShots(ctx context.Context, in func(jobID string) bool, seen map[string]bool, made func(jobcache.Brief) bool) (int, []remadeRun, bool) {
	// The filters run under the job cache's lock: they touch no cache, and
	// the spec is decoded and its schedule parsed only of the jobs made
	// does not settle.
	cands := c.jobs.LiveWhere(func(b jobcache.Brief) bool {
		return !made(b) && !b.Periodic && !b.Paused && in(b.ID)
	}, func(j *protocol.Job) bool {
		if j.Target.Mode == protocol.ModeAll {
			return false
		}
		s, err := schedule.Parse(j.Schedule, j.CreatedAt)
		if err != nil {
			return false
		}
		at, ok := s.Next(time.Time{})
		return ok && !seen[protocol.ExecID(j.ID, at)]
	})
	missing, ok := 0, true
	var remade []remadeRun
	for _, j := range cands {
		s, err := schedule.Parse(j.Schedule, j.CreatedAt)
		if err != nil {
			continue
		}
		at, _ := s.Next(time.Time{})
		id := protocol.ExecID(j.ID, at)
		// Not in ax_execs: its creation was cut short, or it ended and left
		// live state (controller/retention), which the history index knows — unless
		// the index is still being rebuilt and the job is older than the
		// grace: then it is left alone rather than run twice.
		if _, inHist, err := c.hist.idx.Get(ctx, id); err != nil || inHist {
			ok = ok && err == nil
			continue
		}
		// seen holds only the records a reload that leaned on the index
		// read (reloadindex.go): one written long before is looked up.
		if _, err := c.kv.Execs.Get(ctx, id); !errors.Is(err, jetstream.ErrKeyNotFound) {
			ok = ok && err == nil
			continue
		}
		if c.now().Sub(j.CreatedAt) >= c.liveGrace() && !c.hist.caught.Load() {
			c.log.Warn("one-shot job without its execution while the history index catches up; not recreated", "job", j.ID)
			ok = false
			continue
		}
		missing++
		execs, err := c.ex.createRuns(ctx, j, at, "scheduled", runsNotSent)
		if err != nil {
			ok = false
			c.log.Error("create missing execution of one-shot job", "job", j.ID, "err", err)
		}
		for _, e := range execs {
			if e.State == protocol.StatePending && e.Agent != "" {
				remade = append(remade, remadeRun{job: j, rec: &execRecord{Execution: e}})
			}
		}
	}
	return missing, remade, ok
}

// sendRemadeRuns sends the runs of rs, the executions createMissingOneShots
// made again, that AX_CMD does not hold: the job's create sends its run
// right after the record, and a crash may have lost the record but not
// the command. AX_CMD keeps no de-duplication window
// (streams.CommandDuplicates), and a copy would run again on an agent that
// had run the attempt and pruned it while this controller was down. It
// reads the commands stored since the oldest job's creation (headers only;
// rs is empty but after a crash during creates); when that read fails
// every run is sent. It returns false when a run could not be sent.
func (c *reloader) sendRemadeRuns(ctx context.Context, rs []remadeRun) bool {
	if len(rs) == 0 {
		return true
	}
	oldest := rs[0].job.CreatedAt
	for _, r := range rs {
		if r.job.CreatedAt.Before(oldest) {
			oldest = r.job.CreatedAt
		}
	}
	sent, err := c.sentRuns(ctx, oldest, len(rs))
	if err != nil {
		c.log.Warn("reading the run commands AX_CMD holds failed; sending the runs of every execution made again", "err", err)
	}
	ok := true
	for _, r := range rs {
		if sent[runMsgID(r.rec, r.rec.Attempt)] {
			continue
		}
		if err := c.ex.sendRun(ctx, r.job, r.rec, r.rec.Attempt, r.rec.ScheduledAt); err != nil {
			ok = false
			c.log.Error("send run of an execution made again", "exec", r.rec.ExecID, "err", err)
		}
	}
	return ok
}
