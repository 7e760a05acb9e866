package scheduler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// jobRef is the scheduler's record of one job id: the assigned job (if
// any) and the counts that enforce overlap and concurrency. Only the
// scheduler goroutine touches it.
//
// active counts the job's attempts that are TRIGGERED or RUNNING in the
// store (or being written so): in the ready queue, waiting for the job's
// concurrency, running, and also those left in SQLite while the ready
// queue is full (spilled). It is taken from the store at start (recover)
// and changed only where an attempt enters or leaves those states, never
// where it moves between memory and SQLite; overlap=forbid compares it
// with the job's concurrency.
type jobRef struct {
	id       string
	assigned *assignedJob
	limit    int // per-agent concurrency
	active   int // TRIGGERED or RUNNING attempts, spilled ones included
	running  int // dispatched to a worker
	inReady  int // in the ready queue
	waiting  fifo
	// parked: attempts of the job were left in SQLite because as many as
	// it may run at once already wait for it in memory (see accept).
	parked bool
	// parkedFrom is, while parked, the row id below the job's lowest
	// attempt left in SQLite: reloads skip a parked job's rows, so this is
	// where a reload must start again once the job has room.
	parkedFrom int64
	// skip is the job's run of skipped fires not written yet (skips.go).
	skip *skipRun
	// skipListed: the job is in trigger.skipping (at most once).
	skipListed bool
}

// assignedJob is a periodic job planned on a wheel. The payload is not kept.
type assignedJob struct {
	ref        int64
	job        protocol.Job
	sched      schedule.Schedule
	shard      *protocol.ShardSlot
	epoch      uint64
	leaseUntil time.Time // agent monotonic clock; zero: no lease
	lapseSaid  bool      // "lease lapsed" logged since the last grant
	lastFire   time.Time
	planSeq    uint64
	next       time.Time
}

func (j *jobRef) fireable() bool {
	return j.assigned != nil && !j.assigned.job.Paused
}

// jobSet is the job ids the scheduler knows: assigned jobs and jobs with
// active attempts (scheduler goroutine only).
type jobSet struct {
	byID  map[string]*jobRef
	byRef map[int64]*jobRef // assigned jobs by store ref
}

// job returns the record of id, made if needed.
func (s *jobSet) job(id string) *jobRef {
	j := s.byID[id]
	if j == nil {
		j = &jobRef{id: id, limit: 1}
		s.byID[id] = j
	}
	return j
}

// gc forgets a job that is neither assigned nor active.
func (s *jobSet) gc(j *jobRef) {
	if j.assigned == nil && j.active == 0 && j.waiting.size == 0 {
		delete(s.byID, j.id)
	}
}

// load (re)places an assigned job from its stored row. It does not plan.
func (s *jobSet) load(row store.Job) error {
	job, sc, err := decodeJobRow(row)
	if err != nil {
		return err
	}
	job.Payload = nil // stays in SQLite
	j := s.job(row.ID)
	old := j.assigned
	aj := &assignedJob{ref: row.Ref, job: job, sched: sc, epoch: row.Epoch, lastFire: row.LastFire}
	if row.ShardTotal > 0 {
		aj.shard = &protocol.ShardSlot{Index: row.ShardIndex, Total: row.ShardTotal}
	}
	if old != nil {
		aj.planSeq = old.planSeq + 1
		if old.epoch == aj.epoch {
			aj.leaseUntil = old.leaseUntil
		}
		if old.lastFire.After(aj.lastFire) {
			aj.lastFire = old.lastFire
		}
	}
	if old != nil && old.ref != aj.ref {
		delete(s.byRef, old.ref)
	}
	j.assigned = aj
	s.byRef[aj.ref] = j
	j.limit = job.Concurrency
	if job.Overlap == protocol.OverlapQueue {
		j.limit = 1
	}
	return nil
}

// claimed lists the group jobs assigned here with an epoch, valid or not.
func (s *jobSet) claimed() []protocol.HeldLease {
	var out []protocol.HeldLease
	for id, j := range s.byID {
		if aj := j.assigned; aj != nil && aj.epoch > 0 {
			out = append(out, protocol.HeldLease{JobID: id, Epoch: aj.epoch})
		}
	}
	return out
}

// held lists the leases valid at now.
func (s *jobSet) held(now time.Time) []protocol.HeldLease {
	var out []protocol.HeldLease
	for id, j := range s.byID {
		if aj := j.assigned; aj != nil && aj.epoch > 0 && !aj.leaseUntil.IsZero() && now.Before(aj.leaseUntil) {
			out = append(out, protocol.HeldLease{JobID: id, Epoch: aj.epoch})
		}
	}
	return out
}

// decodeJobRow parses a stored job.
func decodeJobRow(row store.Job) (protocol.Job, schedule.Schedule, error) {
	var j protocol.Job
	if err := json.Unmarshal(row.Spec, &j); err != nil {
		return j, nil, fmt.Errorf("decode job %s: %w", row.ID, err)
	}
	j = j.WithDefaults()
	sc, err := schedule.Parse(j.Schedule, j.CreatedAt)
	if err != nil {
		return j, nil, fmt.Errorf("job %s: %w", row.ID, err)
	}
	return j, sc, nil
}

// assigned runs after an assign command is durable.
func (s *Scheduler) assigned(row store.Job) {
	log := s.env.cfg.Log
	if err := s.jobs.load(row); err != nil {
		log.Error("assigned job is invalid; not planned", "job_id", row.ID, "err", err)
		return
	}
	j := s.jobs.byID[row.ID]
	s.runs.fenceMovedOn(j)
	log.Info("job assigned", "job_id", row.ID, "generation", row.Generation, "epoch", row.Epoch,
		"schedule", j.assigned.job.Schedule, "paused", j.assigned.job.Paused)
	s.trig.replan(j, false)
	if row.Epoch > 0 && !s.trig.canFire(j) {
		s.kickHeartbeat() // claim the lease of the new epoch now
	}
}

// unassigned runs after an unassign command is durable.
func (s *Scheduler) unassigned(id string) {
	j := s.jobs.byID[id]
	if j == nil || j.assigned == nil {
		return
	}
	s.trig.flushSkip(j)
	delete(s.jobs.byRef, j.assigned.ref)
	j.assigned = nil
	s.runs.fenceMovedOn(j)
	s.env.cfg.Log.Info("job unassigned", "job_id", id)
	s.jobs.gc(j)
}

// runFence is what a run under a group lease needs to fire: its job's
// lease at its epoch.
type runFence struct {
	jobID string
	epoch uint64
}

// Reasons of fenced reports (Report.Reason).
const (
	fencedUnassigned = "job unassigned here"
	fencedNewerEpoch = "job moved to a newer lease epoch here"
)

// fencedWhy says why an attempt under epoch is fenced for job j (nil or
// unassigned: the job left this agent).
func fencedWhy(j *jobRef) string {
	if j == nil || j.assigned == nil {
		return fencedUnassigned
	}
	return fencedNewerEpoch
}

// rowReport starts a report about an attempt row. Reports after the
// triggered one carry the times of the steps before them (TriggeredAt,
// StartedAt, and with StartedAt the running step's Lag), so that the
// flusher may send only the latest of an attempt's reports still in the
// outbox.
func rowReport(e store.Exec, kind protocol.ReportKind) protocol.Report {
	r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: kind, ScheduledAt: e.ScheduledAt, Epoch: e.Epoch}
	if kind != protocol.ReportTriggered && kind != protocol.ReportSkipped {
		r.TriggeredAt = e.TriggeredAt
		if kind != protocol.ReportRunning && !e.StartedAt.IsZero() {
			// It may stand for the running report (the flusher sends the
			// latest of an attempt's): the running report's lag with it.
			r.StartedAt = e.StartedAt
			r.Lag = protocol.Duration(startLag(e.StartedAt, e.ScheduledAt))
		}
	}
	if e.ShardTotal > 0 {
		r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
	}
	return r
}

// startLag is how late an attempt started after its scheduled time (the
// lag of its running step), never negative.
func startLag(started, scheduled time.Time) time.Duration {
	return max(started.Round(0).Sub(scheduled), 0)
}

// enqueue encodes a report (Host.EncodeReport) into the outbox in tx.
func (e *env) enqueue(tx *store.Tx, r protocol.Report) error {
	rep, err := e.host.EncodeReport(r)
	if err != nil {
		return err
	}
	return rep.Enqueue(tx)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
