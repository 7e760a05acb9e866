package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// recover rebuilds the in-memory state from SQLite before anything runs:
// attempts found RUNNING are reported interrupted (once: the state change
// and the report share a transaction), pending runs go back on the wheels,
// periodic fires found TRIGGERED but never started follow their job's
// misfire policy (settleUnstarted), the attempts left TRIGGERED are counted
// per job and go into the ready queue (through the spill path, with slow
// start), and jobs are re-planned with their misfire policy.
func (a *Agent) recover(ctx context.Context) error {
	s := a.sched
	// 1. RUNNING → INTERRUPTED.
	interrupted := 0
	for {
		rows, err := a.st.LiveExecs(ctx, store.StateRunning, 0, 256)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		now := a.clk.Now().Round(0)
		err = a.st.Do(ctx, func(tx *store.Tx) error {
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
				if err := a.enqueue(tx, r); err != nil {
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
			a.log.Warn("attempt was running when the agent stopped; reported interrupted", "job_id", e.JobID,
				"exec_id", e.ExecID, "attempt", e.Attempt)
		}
	}
	// 2. Jobs.
	jobs, err := a.st.Jobs(ctx)
	if err != nil {
		return err
	}
	for _, row := range jobs {
		if err := s.loadJob(row); err != nil {
			a.log.Error("stored job is invalid; not planned", "job_id", row.ID, "err", err)
		}
	}
	// 3. Pending runs.
	var after int64
	pending := 0
	for {
		rows, err := a.st.LiveExecs(ctx, store.StatePending, after, 4096)
		if err != nil {
			return err
		}
		for _, e := range rows {
			after = e.ID
			s.planRun(e)
			pending++
		}
		if len(rows) < 4096 {
			break
		}
	}
	s.checkSkew()
	// 4. Periodic fires triggered but never started: the job's misfire policy.
	skipped, err := a.settleUnstarted(ctx)
	if err != nil {
		return err
	}
	// 5. Triggered: counted per job (overlap, concurrency) now, reloaded by
	// the first pump.
	live, err := a.st.LiveByJob(ctx)
	if err != nil {
		return err
	}
	for id, l := range live {
		s.job(id).active = l.Triggered
	}
	c, err := a.st.Counts(ctx)
	if err != nil {
		return err
	}
	if c.Triggered > 0 {
		s.spilled = true
		s.slowStart = true
	}
	s.replanAll(true)
	a.log.Info("state recovered", "jobs", len(jobs), "pending", pending, "triggered", c.Triggered,
		"interrupted", interrupted, "unstarted_skipped", skipped, "outbox", c.Outbox)
	return nil
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
func (a *Agent) settleUnstarted(ctx context.Context) (int, error) {
	s := a.sched
	now := s.schedNow()
	jobs := map[string]*unstarted{}
	err := a.eachUnstarted(ctx, func(batch []store.Exec) error {
		for _, e := range batch {
			u := jobs[e.JobID]
			if u == nil {
				u = &unstarted{m: a.misfireOf(ctx, e)}
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
			if u.onTime == 0 && !s.catchesUp(s.jobs[id], now) {
				u.keepLate = u.newestLate
			}
		}
	}
	skipped := 0
	at := a.clk.Now().Round(0)
	err = a.eachUnstarted(ctx, func(batch []store.Exec) error {
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
		err := a.st.Do(ctx, func(tx *store.Tx) error {
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
				if err := a.enqueue(tx, r); err != nil {
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
			a.log.Warn("fire triggered before the agent stopped but never started: skipped by its misfire policy",
				"job_id", e.JobID, "exec_id", e.ExecID, "scheduled_at", e.ScheduledAt, "policy", jobs[e.JobID].m.Policy,
				"grace", jobs[e.JobID].m.Grace)
		}
		return nil
	})
	return skipped, err
}

// eachUnstarted calls fn with the TRIGGERED fires of periodic jobs, in
// pages in row order.
func (a *Agent) eachUnstarted(ctx context.Context, fn func([]store.Exec) error) error {
	const page = 4096
	var after int64
	for {
		rows, err := a.st.LiveExecs(ctx, store.StateTriggered, after, page)
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
func (a *Agent) misfireOf(ctx context.Context, e store.Exec) schedule.Misfire {
	if j := a.sched.jobs[e.JobID]; j != nil && j.assigned != nil {
		return withMisfireDefaults(j.assigned.job.Misfire.Misfire())
	}
	full, err := a.st.Exec(ctx, e.ID)
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

// catchesUp reports whether the job's re-plan at start (replan with
// misfire) will run a fire of its own: it is assigned, may fire, and a
// fire is due after its last one.
func (s *scheduler) catchesUp(j *jobRef, now time.Time) bool {
	if j == nil || j.assigned == nil || !j.fireable() || !s.canFire(j) {
		return false
	}
	aj := j.assigned
	from := aj.lastFire
	if from.IsZero() || from.After(now) {
		from = now
	}
	return len(schedule.Plan(aj.sched, aj.job.Misfire.Misfire(), from, now).Run) > 0
}
