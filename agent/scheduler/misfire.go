package scheduler

import (
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// recordMissed records the fires a misfire plan does not run as one
// SKIPPED attempt (the newest missed fire) with reason "misfire".
func (t *trigger) recordMissed(j *jobRef, plan schedule.MisfirePlan) {
	aj := j.assigned
	at := plan.LastMissed
	execID := protocol.ExecID(j.id, at)
	si, st := -1, 0
	if aj.shard != nil {
		execID = protocol.BroadcastExecID(j.id, at, aj.shard.Index)
		si, st = aj.shard.Index, aj.shard.Total
	}
	ref, epoch, shard, prio := aj.ref, aj.epoch, aj.shard, aj.job.Priority
	now := t.env.now().Round(0)
	t.env.cfg.Log.Warn("missed fires skipped by misfire policy", "job_id", j.id, "missed", plan.Missed,
		"first", plan.FirstMissed, "last", plan.LastMissed, "policy", aj.job.Misfire.Policy)
	t.env.cfg.Store.Submit(func(tx *store.Tx) error {
		_, ins, err := tx.InsertExec(store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
			Priority: prio, Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch, ShardIndex: si, ShardTotal: st,
			FinishedAt: now, Outcome: "skipped"})
		if err != nil || !ins {
			return err
		}
		if err := tx.SetLastFire(ref, at); err != nil {
			return err
		}
		r := protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
			ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "misfire"}
		if plan.Missed > 1 && t.env.cfg.CoalesceSkipped && plan.FirstMissed.Before(at) {
			r.SkippedCount, r.FirstScheduledAt = min(plan.Missed, protocol.MaxSkippedCount), plan.FirstMissed
		}
		return t.env.enqueue(tx, r)
	}, func(err error) {
		if err == nil {
			t.env.host.KickOutbox()
		}
	})
}

// catchesUp reports whether the job's re-plan at start (replan with
// misfire) will run a fire of its own: it is assigned, may fire, and a
// fire is due after its last one.
func (t *trigger) catchesUp(j *jobRef, now time.Time) bool {
	if j == nil || j.assigned == nil || !j.fireable() || !t.canFire(j) {
		return false
	}
	aj := j.assigned
	from := aj.lastFire
	if from.IsZero() || from.After(now) {
		from = now
	}
	return len(schedule.Plan(aj.sched, aj.job.Misfire.Misfire(), from, now).Run) > 0
}
