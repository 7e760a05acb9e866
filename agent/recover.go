package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// recover rebuilds the in-memory state from SQLite before anything runs:
// attempts found RUNNING are reported interrupted (once: the state change
// and the report share a transaction), jobs are re-planned with their
// misfire policy, pending runs go back on the wheels and triggered ones into
// the ready queue (through the spill path, with slow start).
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
	// 4. Triggered: reloaded by the first pump.
	c, err := a.st.Counts(ctx)
	if err != nil {
		return err
	}
	if c.Triggered > 0 {
		s.spilled = true
		s.slowStart = true
	}
	s.checkSkew()
	s.replanAll(true)
	a.log.Info("state recovered", "jobs", len(jobs), "pending", pending, "triggered", c.Triggered,
		"interrupted", interrupted, "outbox", c.Outbox)
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
