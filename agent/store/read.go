package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Meta returns a meta value; ok is false when it is not set.
func (s *Store) Meta(ctx context.Context, key string) (value string, ok bool, err error) {
	err = s.rdb.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read meta %s: %w", key, classify(err))
	}
	return value, true, nil
}

const jobCols = `ref, id, generation, spec, shard_index, shard_total, epoch, lease_expiry, last_fire, skip_n, skip_first, skip_last, skip_epoch`

func scanJob(sc interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var gen, epoch, le, lf, sf, sl, se int64
	if err := sc.Scan(&j.Ref, &j.ID, &gen, &j.Spec, &j.ShardIndex, &j.ShardTotal, &epoch, &le, &lf,
		&j.Skips.N, &sf, &sl, &se); err != nil {
		return Job{}, err
	}
	j.Generation, j.Epoch, j.LeaseExpiry, j.LastFire = uint64(gen), uint64(epoch), fromNS(le), fromNS(lf)
	if j.Skips.N > 0 {
		j.Skips.First, j.Skips.Last, j.Skips.Epoch = fromNS(sf), fromNS(sl), uint64(se)
	}
	return j, nil
}

// Jobs returns every assigned job.
func (s *Store) Jobs(ctx context.Context) ([]Job, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+jobCols+" FROM jobs ORDER BY ref")
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", classify(err))
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("read jobs: %w", classify(err))
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read jobs: %w", classify(err))
	}
	return out, nil
}

// Job returns one assigned job by id.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	j, err := scanJob(s.rdb.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("read job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %s: %w", id, classify(err))
	}
	return j, nil
}

const execCols = `e.id, e.exec_id, e.attempt, e.job_id, e.state, e.priority, e.fine, e.concurrency, e.periodic, e.scheduled_at, e.run_at, e.epoch,
	e.shard_index, e.shard_total, e.triggered_at, e.started_at, e.finished_at, e.outcome`

func scanExec(sc interface{ Scan(...any) error }, extra ...any) (Exec, error) {
	var e Exec
	var sched, run, epoch, trig, start, fin int64
	dst := []any{&e.ID, &e.ExecID, &e.Attempt, &e.JobID, &e.State, &e.Priority, &e.Fine, &e.Concurrency, &e.Periodic, &sched, &run, &epoch,
		&e.ShardIndex, &e.ShardTotal, &trig, &start, &fin, &e.Outcome}
	if err := sc.Scan(append(dst, extra...)...); err != nil {
		return Exec{}, err
	}
	e.ScheduledAt, e.RunAt, e.Epoch = fromNS(sched), fromNS(run), uint64(epoch)
	e.TriggeredAt, e.StartedAt, e.FinishedAt = fromNS(trig), fromNS(start), fromNS(fin)
	return e, nil
}

// Exec returns one attempt with its spec (the run command's snapshot or the
// assigned job's) and result.
func (s *Store) Exec(ctx context.Context, id int64) (Exec, error) {
	var spec, result []byte
	e, err := scanExec(s.rdb.QueryRowContext(ctx, "SELECT "+execCols+`, COALESCE(e.spec, j.spec), e.result
		FROM execs e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.id = ?`, id), &spec, &result)
	if errors.Is(err, sql.ErrNoRows) {
		return Exec{}, fmt.Errorf("read exec %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Exec{}, fmt.Errorf("read exec %d: %w", id, classify(err))
	}
	e.Spec, e.Result = spec, result
	return e, nil
}

// ExecByID returns an attempt by exec id and attempt (without spec).
func (s *Store) ExecByID(ctx context.Context, execID string, attempt int) (Exec, error) {
	var result []byte
	e, err := scanExec(s.rdb.QueryRowContext(ctx, "SELECT "+execCols+", e.result FROM execs e WHERE e.exec_id = ? AND e.attempt = ?",
		execID, attempt), &result)
	if errors.Is(err, sql.ErrNoRows) {
		return Exec{}, fmt.Errorf("read exec %s/%d: %w", execID, attempt, ErrNotFound)
	}
	if err != nil {
		return Exec{}, fmt.Errorf("read exec %s/%d: %w", execID, attempt, classify(err))
	}
	e.Result = result
	return e, nil
}

// LiveExecs returns up to limit attempts in state with id > afterID, in id
// order, without spec and result.
func (s *Store) LiveExecs(ctx context.Context, state string, afterID int64, limit int) ([]Exec, error) {
	return s.liveExecs(ctx, state, afterID, limit, nil, false)
}

// LiveExecsExcept is LiveExecs without the attempts of the jobs in
// exceptJobs (whose rows the caller would skip anyway), and with each
// attempt's spec (its own snapshot or its assigned job's): what running
// it needs, read here rather than in the write that starts it.
func (s *Store) LiveExecsExcept(ctx context.Context, state string, afterID int64, limit int, exceptJobs []string) ([]Exec, error) {
	return s.liveExecs(ctx, state, afterID, limit, exceptJobs, true)
}

func (s *Store) liveExecs(ctx context.Context, state string, afterID int64, limit int, exceptJobs []string, withSpec bool) ([]Exec, error) {
	cols := execCols
	if withSpec {
		cols += ", COALESCE(e.spec, (SELECT spec FROM jobs j WHERE j.id = e.job_id))"
	}
	q, args := "SELECT "+cols+` FROM execs e WHERE e.state = ? AND e.id > ? ORDER BY e.id LIMIT ?`, []any{state, afterID, limit}
	if len(exceptJobs) > 0 {
		ids, err := json.Marshal(exceptJobs)
		if err != nil {
			return nil, fmt.Errorf("read %s execs: %w", state, err)
		}
		q = "SELECT " + cols + ` FROM execs e WHERE e.state = ? AND e.id > ?
			AND e.job_id NOT IN (SELECT value FROM json_each(?)) ORDER BY e.id LIMIT ?`
		args = []any{state, afterID, string(ids), limit}
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s execs: %w", state, classify(err))
	}
	defer rows.Close()
	var out []Exec
	for rows.Next() {
		var spec []byte
		var extra []any
		if withSpec {
			extra = []any{&spec}
		}
		e, err := scanExec(rows, extra...)
		if err != nil {
			return nil, fmt.Errorf("read %s execs: %w", state, classify(err))
		}
		e.Spec = spec
		out = append(out, e)
	}
	s.stats.execRowsRead.Add(int64(len(out)))
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s execs: %w", state, classify(err))
	}
	return out, nil
}

// Outbox returns up to limit messages with seq > after, in order.
func (s *Store) Outbox(ctx context.Context, after int64, limit int) ([]OutboxMsg, error) {
	s.stats.outboxReads.Add(1)
	rows, err := s.rdb.QueryContext(ctx, "SELECT seq, msg_id, subject, data FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?", after, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", classify(err))
	}
	defer rows.Close()
	var out []OutboxMsg
	for rows.Next() {
		var m OutboxMsg
		if err := rows.Scan(&m.Seq, &m.MsgID, &m.Subject, &m.Data); err != nil {
			return nil, fmt.Errorf("read outbox: %w", classify(err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", classify(err))
	}
	return out, nil
}

// Counts returns the live row counts. The outbox's is read from its
// first and last seq, not counted row by row (a heartbeat reads it, and
// the outbox can hold many rows during a partition): its rows are
// deleted only as a prefix (Ack) and the writer gives them consecutive
// seqs, so the two agree (a file written before schema 3 may have gaps,
// which count as rows until they are acknowledged). Rows acknowledged
// with AckLater whose delete has not committed yet are not counted.
func (s *Store) Counts(ctx context.Context) (Counts, error) {
	var c Counts
	var first, last int64
	err := s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM execs WHERE state = 'PENDING'),
		(SELECT count(*) FROM execs WHERE state = 'TRIGGERED'),
		(SELECT count(*) FROM execs WHERE state = 'RUNNING'),
		COALESCE((SELECT MIN(seq) FROM outbox), 0), COALESCE((SELECT MAX(seq) FROM outbox), -1)`).Scan(&c.Pending, &c.Triggered, &c.Running, &first, &last)
	if err != nil {
		return Counts{}, fmt.Errorf("count rows: %w", classify(err))
	}
	first = max(first, s.w.ackFloor.Load()+1)
	c.Outbox = max(0, int(last-first+1))
	return c, nil
}

// Live is how many attempts of one job are TRIGGERED and RUNNING.
type Live struct {
	Triggered, Running int
}

// LiveByJob returns, per job id, its attempts that are TRIGGERED or
// RUNNING (jobs with none are left out), read in one snapshot.
func (s *Store) LiveByJob(ctx context.Context) (map[string]Live, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT job_id, state, count(*) FROM execs
		WHERE state IN ('TRIGGERED', 'RUNNING') GROUP BY job_id, state`)
	if err != nil {
		return nil, fmt.Errorf("count live execs: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]Live{}
	for rows.Next() {
		var id, state string
		var n int
		if err := rows.Scan(&id, &state, &n); err != nil {
			return nil, fmt.Errorf("count live execs: %w", classify(err))
		}
		l := out[id]
		if state == StateRunning {
			l.Running = n
		} else {
			l.Triggered = n
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count live execs: %w", classify(err))
	}
	return out, nil
}

// JobExecs returns up to limit attempts of one job (every state), in id
// order, without spec and result, read in one snapshot. It scans the
// table: for tests and tools, not for the scheduler's paths.
func (s *Store) JobExecs(ctx context.Context, jobID string, limit int) ([]Exec, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+execCols+` FROM execs e WHERE e.job_id = ? ORDER BY e.id LIMIT ?`, jobID, limit)
	if err != nil {
		return nil, fmt.Errorf("read execs of job %s: %w", jobID, classify(err))
	}
	defer rows.Close()
	var out []Exec
	for rows.Next() {
		e, err := scanExec(rows)
		if err != nil {
			return nil, fmt.Errorf("read execs of job %s: %w", jobID, classify(err))
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read execs of job %s: %w", jobID, classify(err))
	}
	return out, nil
}
