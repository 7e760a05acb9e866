package scheduler

import (
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// planRun puts a PENDING run attempt on its wheel.
func (t *trigger) planRun(e store.Exec) {
	if e.Epoch > 0 {
		t.runs.fenced[e.ID] = runFence{jobID: e.JobID, epoch: e.Epoch}
	}
	t.pending++
	t.lane(e.Fine == 1).Add(t.deadline(e.RunAt), wheelItem{id: e.ID, prio: uint8(e.Priority)})
}

// checkSkew applies clock.max_skew to the current offset estimate.
func (t *trigger) checkSkew() {
	off := t.env.host.ClockOffset()
	over := off > t.env.cfg.MaxSkew || -off > t.env.cfg.MaxSkew
	wasRefusing, wasAdopt := t.skewRefusing, t.adopt
	if t.env.cfg.AdoptSkew {
		t.skewRefusing, t.adopt = false, over
	} else {
		t.skewRefusing, t.adopt = over, false
	}
	t.refusing.Store(t.skewRefusing)
	if t.skewRefusing && !wasRefusing {
		t.env.cfg.Log.Error("clock skew to the controller is over clock.max_skew: refusing to fire", "offset", off,
			"max_skew", t.env.cfg.MaxSkew)
	}
	if !t.skewRefusing && wasRefusing {
		t.env.cfg.Log.Info("clock skew back within clock.max_skew: firing again", "offset", off)
		held := t.held
		t.held = nil
		for _, w := range held {
			t.pending++
			t.fire(w)
		}
		t.replanAll(true)
	}
	if t.adopt != wasAdopt {
		t.env.cfg.Log.Warn("clock skew over clock.max_skew: planning on controller time", "offset", off, "adopt", t.adopt)
		t.replanAll(false)
	}
}

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
