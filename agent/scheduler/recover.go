package scheduler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// Recover rebuilds the in-memory state from SQLite before anything runs:
// attempts found RUNNING are reported interrupted (once: the state change
// and the report share a transaction), pending runs go back on the wheels,
// periodic fires found TRIGGERED but never started follow their job's
// misfire policy (settleUnstarted), the attempts left TRIGGERED are counted
// per job and go into the ready queue (through the spill path, with slow
// start), and jobs are re-planned with their misfire policy.
func (s *Scheduler) Recover(ctx context.Context) error {
	rc := recovery{s: s}
	return rc.run(ctx)
}

// recovery is the start-up pass of Recover.
type recovery struct{ s *Scheduler }

func (rc recovery) run(ctx context.Context) error {
	s := rc.s
	cfg := s.env.cfg
	// 1. RUNNING → INTERRUPTED.
	interrupted := 0
	for {
		rows, err := cfg.Store.LiveExecs(ctx, store.StateRunning, 0, 256)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		now := cfg.Clock.Now().Round(0)
		err = cfg.Store.Do(ctx, func(tx *store.Tx) error {
			for _, e := range rows {
				ok, err := tx.Finish(e.ID, store.StateInterrupted, now, string(retry.OutcomeInterrupted), nil)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				r := rowReport(e, protocol.ReportInterrupted)
				r.Reason = "restart"
				if err := s.env.enqueue(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		interrupted += len(rows)
		for _, e := range rows {
			cfg.Log.Warn("attempt was running when the agent stopped; reported interrupted", "job_id", e.JobID,
				"exec_id", e.ExecID, "attempt", e.Attempt)
		}
	}
	// 2. Jobs.
	jobs, err := cfg.Store.Jobs(ctx)
	if err != nil {
		return err
	}
	for _, row := range jobs {
		if err := s.jobs.load(row); err != nil {
			cfg.Log.Error("stored job is invalid; not planned", "job_id", row.ID, "err", err)
			continue
		}
		s.trig.restoreSkips(s.jobs.byID[row.ID], row.Skips)
	}
	// 3. Pending runs.
	var after int64
	pending := 0
	for {
		rows, err := cfg.Store.LiveExecs(ctx, store.StatePending, after, 4096)
		if err != nil {
			return err
		}
		for _, e := range rows {
			after = e.ID
			s.trig.planRun(e)
			pending++
		}
		if len(rows) < 4096 {
			break
		}
	}
	s.trig.checkSkew()
	// 4. Periodic fires triggered but never started: the job's misfire policy.
	skipped, err := rc.settleUnstarted(ctx)
	if err != nil {
		return err
	}
	// 5. Triggered: counted per job (overlap, concurrency) now, reloaded by
	// the first pump.
	live, err := cfg.Store.LiveByJob(ctx)
	if err != nil {
		return err
	}
	for id, l := range live {
		s.jobs.job(id).active = l.Triggered
	}
	c, err := cfg.Store.Counts(ctx)
	if err != nil {
		return err
	}
	if c.Triggered > 0 {
		s.runs.spilled = true
		s.runs.slowStart = true
	}
	s.trig.replanAll(true)
	cfg.Log.Info("state recovered", "jobs", len(jobs), "pending", pending, "triggered", c.Triggered,
		"interrupted", interrupted, "unstarted_skipped", skipped, "outbox", c.Outbox)
	return nil
}

// unstarted is what settleUnstarted learns of one job's periodic fires
// found TRIGGERED at start.
type unstarted struct {
	m          schedule.Misfire
	onTime     int       // fires within the job's misfire grace
	newestLate int64     // row of the newest fire past the grace
	newestAt   time.Time // its scheduled time
	keepLate   int64     // the late row that still runs (fire_once); 0: none
}

// settleUnstarted applies, at start, each job's misfire policy to the
// fires of periodic jobs found TRIGGERED: made before the agent stopped,
// never started. A fire within the job's misfire grace (now - scheduled ≤
// grace) is on time and runs. The late ones are the job's missed fires:
// fire_all runs them all; skip runs none; fire_once runs one, the newest,
// unless the job runs a fire anyway (an on-time one, or the catch-up of
// the fires missed while down that replan makes next). Each fire not run
// is finished SKIPPED with reason "misfire" and reported, so that the
// controller moves its TRIGGERED record on. Runs sent by the controller
// (one-shot jobs, triggers, retries) are not fires: they always run.
func (rc recovery) settleUnstarted(ctx context.Context) (int, error) {
	s := rc.s
	cfg := s.env.cfg
	now := s.trig.schedNow()
	jobs := map[string]*unstarted{}
	err := rc.eachUnstarted(ctx, func(batch []store.Exec) error {
		for _, e := range batch {
			u := jobs[e.JobID]
			if u == nil {
				u = &unstarted{m: rc.misfireOf(ctx, e)}
				jobs[e.JobID] = u
			}
			switch {
			case now.Sub(e.ScheduledAt) <= u.m.Grace:
				u.onTime++
			case u.newestLate == 0 || e.ScheduledAt.After(u.newestAt):
				u.newestLate, u.newestAt = e.ID, e.ScheduledAt
			}
		}
		return nil
	})
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	for id, u := range jobs {
		switch u.m.Policy {
		case schedule.FireAll:
			u.keepLate = -1 // every one
		case schedule.FireOnce:
			if u.onTime == 0 && !s.trig.catchesUp(s.jobs.byID[id], now) {
				u.keepLate = u.newestLate
			}
		}
	}
	skipped := 0
	at := cfg.Clock.Now().Round(0)
	err = rc.eachUnstarted(ctx, func(batch []store.Exec) error {
		var skip []store.Exec
		for _, e := range batch {
			u := jobs[e.JobID]
			if u == nil || now.Sub(e.ScheduledAt) <= u.m.Grace || u.keepLate == -1 || u.keepLate == e.ID {
				continue
			}
			skip = append(skip, e)
		}
		if len(skip) == 0 {
			return nil
		}
		err := cfg.Store.Do(ctx, func(tx *store.Tx) error {
			for _, e := range skip {
				ok, err := tx.Finish(e.ID, store.StateSkipped, at, "skipped", nil)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				r := rowReport(e, protocol.ReportSkipped)
				r.Reason = "misfire"
				if err := s.env.enqueue(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		skipped += len(skip)
		for _, e := range skip {
			cfg.Log.Warn("fire triggered before the agent stopped but never started: skipped by its misfire policy",
				"job_id", e.JobID, "exec_id", e.ExecID, "scheduled_at", e.ScheduledAt, "policy", jobs[e.JobID].m.Policy,
				"grace", jobs[e.JobID].m.Grace)
		}
		return nil
	})
	return skipped, err
}

// eachUnstarted calls fn with the TRIGGERED fires of periodic jobs, in
// pages in row order.
func (rc recovery) eachUnstarted(ctx context.Context, fn func([]store.Exec) error) error {
	const page = 4096
	var after int64
	for {
		rows, err := rc.s.env.cfg.Store.LiveExecs(ctx, store.StateTriggered, after, page)
		if err != nil {
			return err
		}
		batch := rows[:0]
		for _, e := range rows {
			after = e.ID
			if e.Periodic {
				batch = append(batch, e)
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
		}
		if len(rows) < page {
			return nil
		}
	}
}

// misfireOf returns the misfire policy of an attempt's job: the assigned
// job's, or the spec its row kept (a job unassigned meanwhile). Without
// either, fire_all: the attempt runs, as it would have.
func (rc recovery) misfireOf(ctx context.Context, e store.Exec) schedule.Misfire {
	if j := rc.s.jobs.byID[e.JobID]; j != nil && j.assigned != nil {
		return withMisfireDefaults(j.assigned.job.Misfire.Misfire())
	}
	full, err := rc.s.env.cfg.Store.Exec(ctx, e.ID)
	if err == nil && full.Spec != nil {
		var job protocol.Job
		if json.Unmarshal(full.Spec, &job) == nil {
			return withMisfireDefaults(job.WithDefaults().Misfire.Misfire())
		}
	}
	return schedule.Misfire{Policy: schedule.FireAll}
}

func withMisfireDefaults(m schedule.Misfire) schedule.Misfire {
	if m.Policy == "" {
		m.Policy = schedule.FireOnce
	}
	m.Grace = max(m.Grace, 0)
	return m
}
