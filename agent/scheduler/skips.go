package scheduler

import (
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// skipRun is a job's fires skipped by overlap=forbid and not written yet:
// with outbox.coalesce_skipped they are recorded as one SKIPPED row and
// one report, carrying the count (Report.SkippedCount) and the first and
// last fire times, so that under overload a skipped fire costs almost
// nothing. A run is written with the job's next real fire (before it),
// at the first tick at least Config.SkippedWindow after it began, at
// unassign, on an epoch change and at shutdown. So a job that cannot keep
// up with its schedule makes one skipped record per real fire, and a job
// whose attempt does not end one per window. Until written, its fires
// are not recorded anywhere (the job's last_fire is not moved): after a
// crash the restart applies the misfire policy to them.
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
		case k == nil: // written with a real fire, or at unassign
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
