package scheduler

import (
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// skipRun is a job's fires skipped by overlap=forbid and not reported
// yet: with outbox.coalesce_skipped they are recorded as one SKIPPED row
// and one report, carrying the count (Report.SkippedCount) and the first
// and last fire times, so that under overload a skipped fire costs almost
// nothing. The run is written at the first tick at least
// Config.SkippedWindow after it began, at unassign, on an epoch change
// and at shutdown: one skipped record per job per window, however its
// real and skipped fires alternate.
//
// Durability: a skipped fire does not move the job's last_fire. A run's
// fires after the job's last real fire are recorded nowhere until the run
// is written; after a crash the restart's misfire policy accounts for
// them, as for any fire after last_fire. A real fire moves last_fire past
// the run's fires so far, so it holds them in the job's row in the same
// transaction (fireRec.held, store.Skips); a restart takes the held run
// back (restoreSkips) and writes it at the window. Each real fire under
// overload thus updates its job's row once more, and the controller gets
// one record per window instead of one per real fire.
type skipRun struct {
	ref         int64
	first, last time.Time
	since       time.Time // the agent's clock when the run began
	n           int
	epoch       uint64
	shard       *protocol.ShardSlot
	prio        int
	fine        bool
	limit       int
}

// skipFire counts a fire skipped by overlap into the job's run.
func (t *trigger) skipFire(j *jobRef, at time.Time) {
	aj := j.assigned
	if k := j.skip; k != nil && k.epoch != aj.epoch {
		t.flushSkip(j)
	}
	if j.skip == nil {
		j.skip = &skipRun{ref: aj.ref, first: at, since: t.env.now(), epoch: aj.epoch, shard: aj.shard, prio: aj.job.Priority,
			fine: aj.job.Precision == protocol.PrecisionFine, limit: j.limit}
		if !j.skipListed {
			j.skipListed = true
			t.skipping = append(t.skipping, j)
		}
	}
	j.skip.last = at
	j.skip.n++
}

// holdSkips returns the job's run of skipped fires to hold in its row
// with a real fire (nil when there is none); a run of another epoch, or
// of an earlier row of the job (unassigned and assigned again), is
// written instead (flushSkip): the row it is held in is the one its
// write clears.
func (t *trigger) holdSkips(j *jobRef) *store.Skips {
	k := j.skip
	if k == nil {
		return nil
	}
	if k.epoch != j.assigned.epoch || k.ref != j.assigned.ref {
		t.flushSkip(j)
		return nil
	}
	return &store.Skips{N: k.n, First: k.first, Last: k.last, Epoch: k.epoch}
}

// restoreSkips takes back the run of skipped fires held in a job's row
// (store.Job.Skips) at a restart; it is written at the window from now.
func (t *trigger) restoreSkips(j *jobRef, h store.Skips) {
	aj := j.assigned
	if h.N <= 0 || aj == nil || j.skip != nil {
		return
	}
	j.skip = &skipRun{ref: aj.ref, first: h.First, last: h.Last, n: h.N, since: t.env.now(), epoch: h.Epoch, shard: aj.shard,
		prio: aj.job.Priority, fine: aj.job.Precision == protocol.PrecisionFine, limit: j.limit}
	if !j.skipListed {
		j.skipListed = true
		t.skipping = append(t.skipping, j)
	}
}

// flushSkip queues the job's skipped run, if any, with the batched fires.
func (t *trigger) flushSkip(j *jobRef) {
	k := j.skip
	if k == nil {
		return
	}
	j.skip = nil
	execID := protocol.ExecID(j.id, k.last)
	si, st := -1, 0
	if k.shard != nil {
		execID = protocol.BroadcastExecID(j.id, k.last, k.shard.Index)
		si, st = k.shard.Index, k.shard.Total
	}
	r := protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
		ScheduledAt: k.last, Epoch: k.epoch, Shard: k.shard, Reason: "overlap"}
	if k.n > 1 {
		r.SkippedCount, r.FirstScheduledAt = k.n, k.first
	}
	rep, err := t.env.host.EncodeReport(r)
	if err != nil {
		t.env.cfg.Log.Error("record skipped fires", "exec_id", execID, "fires", k.n, "err", err)
		return
	}
	t.queueFire(&fireRec{j: j, ref: k.ref, rep: rep, row: &store.Exec{ExecID: execID, Attempt: 1, JobID: j.id,
		State: store.StateSkipped, Periodic: true, Priority: k.prio, Fine: b2i(k.fine), Concurrency: k.limit,
		ScheduledAt: k.last, RunAt: k.last, Epoch: k.epoch, ShardIndex: si, ShardTotal: st,
		FinishedAt: t.env.now().Round(0), Outcome: "skipped"}})
}

// flushSkips queues the skipped run of every job that began at least
// window before now (each scheduler tick; 0 at shutdown: every run).
func (t *trigger) flushSkips(now time.Time, window time.Duration) {
	kept := t.skipping[:0]
	for _, j := range t.skipping {
		switch k := j.skip; {
		case k == nil: // written at unassign or on an epoch change
			j.skipListed = false
		case now.Sub(k.since) >= window:
			t.flushSkip(j)
			j.skipListed = false
		default:
			kept = append(kept, j)
		}
	}
	clear(t.skipping[len(kept):])
	t.skipping = kept
}
