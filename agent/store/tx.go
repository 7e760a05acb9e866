package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

type stmts struct {
	setMeta, upsertJob, snapshotSpecs, deleteJob, setLastFire, setSkips, setEpoch *sql.Stmt
	insertExec, finish, ack, prune                                                *sql.Stmt
	liveAttempt, execRow, trigger, notDue, jobSpec, execSpec                      *sql.Stmt
	setRunningAll                                                                 *sql.Stmt
	removedGen, noteRemoved, forgetRemoved, pruneRemoved                          *sql.Stmt
	// enqueue[k] inserts 1<<k outbox rows with their seq (flushOutbox).
	enqueue [enqueueSizes]*sql.Stmt
}

// enqueueSizes is the number of multi-row outbox inserts prepared: 1, 2,
// 4, … 1<<(enqueueSizes-1) rows each.
const enqueueSizes = 6

func enqueueSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO outbox(seq, msg_id, subject, data) VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?)")
	}
	return b.String()
}

func prepare(ctx context.Context, db *sql.DB) (*stmts, error) {
	s := &stmts{}
	type prep struct {
		dst **sql.Stmt
		q   string
	}
	var multi []prep
	for k := range s.enqueue {
		multi = append(multi, prep{&s.enqueue[k], enqueueSQL(1 << k)})
	}
	for _, p := range append([]prep{
		{&s.setMeta, `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`},
		{&s.upsertJob, `INSERT INTO jobs(id, generation, spec, shard_index, shard_total, epoch) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET generation = excluded.generation, spec = excluded.spec,
			shard_index = excluded.shard_index, shard_total = excluded.shard_total, epoch = excluded.epoch
			WHERE excluded.generation > jobs.generation OR (excluded.generation = jobs.generation AND excluded.epoch >= jobs.epoch)
			RETURNING ref, last_fire`},
		{&s.snapshotSpecs, `UPDATE execs SET spec = (SELECT spec FROM jobs WHERE id = ?1)
			WHERE job_id = ?1 AND spec IS NULL AND state IN ('PENDING', 'TRIGGERED', 'RUNNING')`},
		{&s.deleteJob, `DELETE FROM jobs WHERE id = ? AND (? = 0 OR generation <= ?)`},
		{&s.setLastFire, `UPDATE jobs SET last_fire = ? WHERE ref = ? AND last_fire < ?`},
		{&s.setSkips, `UPDATE jobs SET skip_n = ?, skip_first = ?, skip_last = ?, skip_epoch = ? WHERE ref = ?`},
		{&s.setEpoch, `UPDATE jobs SET epoch = ?, lease_expiry = ? WHERE id = ? AND epoch <= ?`},
		{&s.insertExec, `INSERT INTO execs(exec_id, attempt, job_id, state, priority, fine, concurrency, periodic, scheduled_at, run_at, epoch,
			shard_index, shard_total, spec, triggered_at, started_at, finished_at, outcome, result)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(exec_id, attempt) DO NOTHING`},
		{&s.trigger, `UPDATE execs SET state = 'TRIGGERED', triggered_at = ? WHERE id = ? AND state = 'PENDING' AND scheduled_at <= ?
			RETURNING exec_id, attempt, job_id, priority, concurrency, scheduled_at, epoch, shard_index, shard_total, spec`},
		{&s.notDue, `SELECT scheduled_at FROM execs WHERE id = ? AND state = 'PENDING'`},
		{&s.jobSpec, `SELECT spec FROM jobs WHERE ref = ?`},
		{&s.execSpec, `SELECT COALESCE(e.spec, j.spec) FROM execs e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.id = ?`},
		{&s.setRunningAll, `UPDATE execs SET state = 'RUNNING', started_at = ?
			WHERE id IN (SELECT value FROM json_each(?)) AND +state = 'TRIGGERED' RETURNING id`},
		{&s.finish, `UPDATE execs SET state = ?, finished_at = ?, outcome = ?, result = ?
			WHERE id = ? AND state IN ('PENDING', 'TRIGGERED', 'RUNNING')`},
		{&s.ack, `DELETE FROM outbox WHERE seq <= ?`},
		{&s.prune, `DELETE FROM execs WHERE finished_at > 0 AND finished_at < ?`},
		{&s.removedGen, `SELECT generation FROM removed WHERE id = ?`},
		// The generation a job is taken at: the unassign's, or, for one of
		// any generation (0), that of the row it deletes; none when both
		// are 0 (nothing to keep out).
		{&s.noteRemoved, `INSERT INTO removed(id, generation, at)
			SELECT ?1, g, ?3 FROM (SELECT max(?2, COALESCE((SELECT generation FROM jobs WHERE id = ?1 AND (?2 = 0 OR generation <= ?2)), 0)) AS g) WHERE g > 0
			ON CONFLICT(id) DO UPDATE SET generation = max(removed.generation, excluded.generation), at = excluded.at`},
		{&s.forgetRemoved, `DELETE FROM removed WHERE id = ?`},
		{&s.pruneRemoved, `DELETE FROM removed WHERE at < ?`},
		{&s.execRow, `SELECT ` + execCols + ` FROM execs e WHERE e.id = ?`},
		{&s.liveAttempt, `SELECT ` + execCols + ` FROM execs e WHERE e.exec_id = ? AND e.state IN ('PENDING', 'TRIGGERED', 'RUNNING')
			ORDER BY e.attempt DESC LIMIT 1`},
	}, multi...) {
		st, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("prepare: %w", classify(err))
		}
		*p.dst = st
	}
	return s, nil
}

func (s *stmts) close() {
	for _, st := range []*sql.Stmt{s.setMeta, s.upsertJob, s.snapshotSpecs, s.deleteJob, s.setLastFire, s.setSkips, s.setEpoch,
		s.insertExec, s.finish, s.ack, s.prune, s.liveAttempt, s.execRow, s.trigger, s.notDue, s.jobSpec, s.execSpec, s.setRunningAll,
		s.removedGen, s.noteRemoved, s.forgetRemoved, s.pruneRemoved} {
		if st != nil {
			_ = st.Close()
		}
	}
	for _, st := range s.enqueue {
		if st != nil {
			_ = st.Close()
		}
	}
}

// Tx is one write function's view of the batch transaction.
type Tx struct {
	tx  *sql.Tx
	st  *stmts
	ctx context.Context
	// bound caches the transaction's copy of each prepared statement (one
	// StmtContext per statement per batch instead of per call).
	bound map[*sql.Stmt]*sql.Stmt
	// atCommit holds meta values written once, just before the commit
	// (the last value set in the batch wins); fnMeta is the running write
	// function's share, merged into atCommit only if the function succeeds.
	atCommit map[string]string
	fnMeta   map[string]string
	// rows are the outbox rows written by the batch's successful
	// functions (handed to the outbox sink after the commit); fnRows are
	// the running function's.
	rows, fnRows []OutboxMsg
	// n counts the statements run (Stats.Statements).
	n int64
}

func (t *Tx) stmt(st *sql.Stmt) *sql.Stmt {
	t.n++
	if b, ok := t.bound[st]; ok {
		return b
	}
	if t.bound == nil {
		t.bound = make(map[*sql.Stmt]*sql.Stmt, 8)
	}
	b := t.tx.StmtContext(t.ctx, st)
	t.bound[st] = b
	return b
}

func (t *Tx) exec(st *sql.Stmt, args ...any) (sql.Result, error) {
	r, err := t.stmt(st).ExecContext(t.ctx, args...)
	return r, classify(err)
}

// SetMetaAtCommit sets a meta value in this transaction, written once per
// batch just before the commit (the last value set wins). It suits values
// every write function of a batch sets, such as the command cursor. If
// the write function fails, its value is dropped with its other changes.
func (t *Tx) SetMetaAtCommit(key, value string) {
	if t.fnMeta == nil {
		t.fnMeta = map[string]string{}
	}
	t.fnMeta[key] = value
}

// endFn merges (ok) or drops the running function's deferred meta and
// outbox rows.
func (t *Tx) endFn(ok bool) {
	if ok {
		t.rows = append(t.rows, t.fnRows...)
	}
	t.fnRows = t.fnRows[:0]
	if len(t.fnMeta) == 0 {
		return
	}
	if ok {
		if t.atCommit == nil {
			t.atCommit = map[string]string{}
		}
		for k, v := range t.fnMeta {
			t.atCommit[k] = v
		}
	}
	clear(t.fnMeta)
}

// flushMeta writes the deferred meta values.
func (t *Tx) flushMeta() error {
	for k, v := range t.atCommit {
		if err := t.SetMeta(k, v); err != nil {
			return err
		}
	}
	return nil
}

func affected(r sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n > 0, err
}

// SetMeta sets a meta value.
func (t *Tx) SetMeta(key, value string) error {
	_, err := t.exec(t.st.setMeta, key, value)
	return err
}

// PutJob stores j unless a higher generation (or, at the same generation, a
// higher epoch) is stored already, or the job was taken from this agent
// at a higher generation (DeleteJob). It returns the job's Ref, its stored
// LastFire and whether j was written.
func (t *Tx) PutJob(j Job) (ref int64, lastFire time.Time, written bool, err error) {
	var gone int64
	switch err := t.stmt(t.st.removedGen).QueryRowContext(t.ctx, j.ID).Scan(&gone); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, time.Time{}, false, classify(err)
	case uint64(gone) > j.Generation:
		return 0, time.Time{}, false, nil
	default:
		if _, err := t.exec(t.st.forgetRemoved, j.ID); err != nil {
			return 0, time.Time{}, false, err
		}
	}
	var lf int64
	err = t.stmt(t.st.upsertJob).QueryRowContext(t.ctx, j.ID, int64(j.Generation), j.Spec,
		j.ShardIndex, j.ShardTotal, int64(j.Epoch)).Scan(&ref, &lf)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, classify(err)
	}
	return ref, fromNS(lf), true, nil
}

// DeleteJob forgets job id (if its generation ≤ gen, or any when gen is 0)
// and keeps, until Prune passes at, the generation it was taken at (gen,
// or the deleted row's when gen is 0): PutJob refuses an older one after
// it. Live executions of the job keep a copy of its spec so that they can
// still run.
func (t *Tx) DeleteJob(id string, gen uint64, at time.Time) (bool, error) {
	if _, err := t.exec(t.st.noteRemoved, id, int64(gen), ns(at)); err != nil {
		return false, err
	}
	if _, err := t.exec(t.st.snapshotSpecs, id); err != nil {
		return false, err
	}
	return affected(t.exec(t.st.deleteJob, id, int64(gen), int64(gen)))
}

// SetLastFire records the scheduled time of a job's last handled fire (it
// never moves back).
func (t *Tx) SetLastFire(ref int64, at time.Time) error {
	_, err := t.exec(t.st.setLastFire, ns(at), ref, ns(at))
	return err
}

// SetSkips holds a job's run of skipped fires in its row (Job.Skips); a
// zero s clears it. A job no longer stored is left alone.
func (t *Tx) SetSkips(ref int64, s Skips) error {
	var first, last int64
	if s.N > 0 {
		first, last = ns(s.First), ns(s.Last)
	}
	_, err := t.exec(t.st.setSkips, s.N, first, last, int64(s.Epoch), ref)
	return err
}

// SetEpoch records a group job's lease epoch (never moving back).
func (t *Tx) SetEpoch(jobID string, epoch uint64, expiry time.Time) (bool, error) {
	return affected(t.exec(t.st.setEpoch, int64(epoch), ns(expiry), jobID, int64(epoch)))
}

// InsertExec inserts an attempt; inserted is false (and id 0) when the
// exec_id+attempt exists already.
func (t *Tx) InsertExec(e Exec) (id int64, inserted bool, err error) {
	var spec any
	if e.Spec != nil {
		spec = e.Spec
	}
	var result any
	if e.Result != nil {
		result = e.Result
	}
	// Exec, not RETURNING: the query path of database/sql costs more; the
	// new row's id is the last insert rowid.
	r, err := t.exec(t.st.insertExec, e.ExecID, e.Attempt, e.JobID, e.State,
		e.Priority, e.Fine, e.Concurrency, b2i(e.Periodic), ns(e.ScheduledAt), ns(e.RunAt), int64(e.Epoch), e.ShardIndex, e.ShardTotal, spec,
		ns(e.TriggeredAt), ns(e.StartedAt), ns(e.FinishedAt), e.Outcome, result)
	if err != nil {
		return 0, false, err
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return 0, false, classify(err) // nil: the attempt is there already
	}
	if id, err = r.LastInsertId(); err != nil {
		return 0, false, classify(err)
	}
	return id, true, nil
}

// Trigger moves a PENDING attempt to TRIGGERED at `at` and returns what
// running it needs (the attempt's fields and its job spec); ok is false
// when the attempt is not PENDING (cancelled meanwhile), or when its
// scheduled time is after dueBy: then e has State PENDING and its
// ScheduledAt, and the caller waits for it (a run never starts early).
func (t *Tx) Trigger(id int64, at, dueBy time.Time) (e Exec, ok bool, err error) {
	var sched, epoch int64
	var spec []byte
	err = t.stmt(t.st.trigger).QueryRowContext(t.ctx, ns(at), id, ns(dueBy)).Scan(&e.ExecID, &e.Attempt, &e.JobID, &e.Priority,
		&e.Concurrency, &sched, &epoch, &e.ShardIndex, &e.ShardTotal, &spec)
	if errors.Is(err, sql.ErrNoRows) {
		err = t.stmt(t.st.notDue).QueryRowContext(t.ctx, id).Scan(&sched)
		if errors.Is(err, sql.ErrNoRows) {
			return Exec{}, false, nil
		}
		if err != nil {
			return Exec{}, false, classify(err)
		}
		return Exec{ID: id, State: StatePending, ScheduledAt: fromNS(sched)}, false, nil
	}
	if err != nil {
		return Exec{}, false, classify(err)
	}
	e.ID, e.State, e.ScheduledAt, e.Epoch, e.TriggeredAt = id, StateTriggered, fromNS(sched), uint64(epoch), at
	e.RunAt = e.ScheduledAt
	e.Spec = spec // Scan copied it
	return e, true, nil
}

// JobSpec returns the spec of the assigned job with ref.
func (t *Tx) JobSpec(ref int64) ([]byte, error) {
	var spec []byte
	err := t.stmt(t.st.jobSpec).QueryRowContext(t.ctx, ref).Scan(&spec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, classify(err)
	}
	return spec, nil // Scan copied it
}

// ExecSpec returns the job spec an attempt runs with: its own snapshot (run
// commands, unassigned jobs) or its assigned job's.
func (t *Tx) ExecSpec(id int64) ([]byte, error) {
	var spec []byte
	err := t.stmt(t.st.execSpec).QueryRowContext(t.ctx, id).Scan(&spec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, classify(err)
	}
	return spec, nil // Scan copied it
}

// MarkRunningAll moves the TRIGGERED attempts among ids to RUNNING, all
// started at `at`, in one statement, and returns the ids it moved (the
// others were no longer TRIGGERED: cancelled meanwhile).
func (t *Tx) MarkRunningAll(ids []int64, at time.Time) (map[int64]bool, error) {
	list := make([]byte, 0, 1+len(ids)*8)
	list = append(list, '[')
	for i, id := range ids {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, id, 10)
	}
	list = append(list, ']')
	rows, err := t.stmt(t.st.setRunningAll).QueryContext(t.ctx, ns(at), string(list))
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	moved := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, classify(err)
		}
		moved[id] = true
	}
	return moved, classify(rows.Err())
}

// Finish moves a live attempt to a final state (FINISHED, SKIPPED,
// INTERRUPTED) with its outcome and result JSON.
func (t *Tx) Finish(id int64, state string, at time.Time, outcome string, result []byte) (bool, error) {
	return affected(t.exec(t.st.finish, state, ns(at), outcome, result, id))
}

// Enqueue adds a report to the outbox. The row is written when the batch
// commits (flushOutbox: all the batch's reports in a few multi-row
// inserts), and handed to the outbox sink, if one is set (SetOutboxSink),
// once the transaction is durable; data must not be changed after. Msg
// ids are not checked for uniqueness: enqueue a report only in the write
// that makes the step it reports (JetStream drops a duplicate msg id
// within its window, and the controller applies a report once).
func (t *Tx) Enqueue(msgID, subject string, data []byte) error {
	t.fnRows = append(t.fnRows, OutboxMsg{MsgID: msgID, Subject: subject, Data: data})
	return nil
}

// EnqueueHeld is Enqueue for a report whose publish may be held back a
// while (OutboxMsg.Hold, handed to the outbox sink only); the row written
// is the same.
func (t *Tx) EnqueueHeld(msgID, subject string, data []byte) error {
	t.fnRows = append(t.fnRows, OutboxMsg{MsgID: msgID, Subject: subject, Data: data, Hold: true})
	return nil
}

// flushOutbox inserts the batch's outbox rows with the seqs after last
// and returns the highest seq used.
func (t *Tx) flushOutbox(last int64) (int64, error) {
	if len(t.rows) == 0 {
		return last, nil
	}
	for i := range t.rows {
		last++
		t.rows[i].Seq = last
	}
	args := make([]any, 0, 4<<(enqueueSizes-1))
	for rest := t.rows; len(rest) > 0; {
		k := enqueueSizes - 1
		for 1<<k > len(rest) {
			k--
		}
		args = args[:0]
		for _, m := range rest[:1<<k] {
			args = append(args, m.Seq, m.MsgID, m.Subject, m.Data)
		}
		if _, err := t.exec(t.st.enqueue[k], args...); err != nil {
			return 0, fmt.Errorf("write outbox: %w", err)
		}
		rest = rest[1<<k:]
	}
	return last, nil
}

// Ack deletes every outbox message up to seq (they were acknowledged).
func (t *Tx) Ack(seq int64) error {
	_, err := t.exec(t.st.ack, seq)
	return err
}

// Prune deletes final attempts that finished before before, and the
// generations of jobs taken before it (DeleteJob). It returns how many
// attempts it deleted.
func (t *Tx) Prune(before time.Time) (int64, error) {
	r, err := t.exec(t.st.prune, ns(before))
	if err != nil {
		return 0, err
	}
	if _, err := t.exec(t.st.pruneRemoved, ns(before)); err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// LiveAttempt returns the newest live (PENDING, TRIGGERED, RUNNING) attempt
// of an execution; ok is false when there is none.
func (t *Tx) LiveAttempt(execID string) (e Exec, ok bool, err error) {
	e, err = scanExec(t.stmt(t.st.liveAttempt).QueryRowContext(t.ctx, execID))
	if errors.Is(err, sql.ErrNoRows) {
		return Exec{}, false, nil
	}
	if err != nil {
		return Exec{}, false, classify(err)
	}
	return e, true, nil
}

// ExecRow returns an attempt by row id (without spec and result).
func (t *Tx) ExecRow(id int64) (Exec, error) {
	e, err := scanExec(t.stmt(t.st.execRow).QueryRowContext(t.ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Exec{}, ErrNotFound
	}
	return e, classify(err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
