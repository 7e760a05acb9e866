package histindex

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// Index is the SQLite file behind the execution history
// (history.go): one row per execution (its latest snapshot from AX_EVT),
// the retired one-shot jobs, and the AX_EVT sequence applied last, written
// in the same transaction as the rows it applied. One writer connection
// (the history follower), several readers (the API); WAL mode, so readers
// never wait for the writer.
type Index struct {
	wdb, rdb *sql.DB
	shards   int
	rebuilt  bool // opened on an index of another version, emptied
}

// Version is the schema's version (PRAGMA user_version). An index
// of another version is emptied and rebuilt from AX_EVT when opened: it
// holds nothing the stream does not.
const Version = 4

// The execution rows and their bodies are keyed by an integer assigned in
// insertion order (id), not by exec id: a batch of new executions then
// appends to the two largest b-trees instead of touching a random page of
// each per row, and the later steps of an execution (seconds after its
// first) update rows near the end. Exec ids are random across jobs; the
// per-row page writes of the first version made a commit of 1,000 rows
// write about 16 MB of WAL. An exec id starts with its job's id
// (protocol.ExecID), so the exec id index also finds a job's executions
// (jobRange); there is no index by job. The indexes by exec id, agent and
// state stay random by nature. The index of live rows (Stamps, for a
// shard's reload) is keyed by shard and id, not exec id, so it is
// appended to as well (version 4; keyed by exec id it was a fourth random
// b-tree: BenchmarkHistoryIndexApply 10,200–10,400 rows/s and 24.9 KB
// written per row, against 13,000–13,100 and 17.7 KB).
const historySchema = `
CREATE TABLE IF NOT EXISTS execs (
	id           INTEGER PRIMARY KEY,
	exec_id      TEXT NOT NULL UNIQUE,
	job_id       TEXT NOT NULL,
	agent        TEXT NOT NULL,
	state        TEXT NOT NULL,
	scheduled_at INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	terminal     INTEGER NOT NULL,
	shard        INTEGER NOT NULL,
	live         INTEGER NOT NULL DEFAULT 1,
	progress     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS bodies (
	id   INTEGER PRIMARY KEY,
	body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS execs_agent ON execs (agent, exec_id);
CREATE INDEX IF NOT EXISTS execs_state ON execs (state, exec_id);
CREATE INDEX IF NOT EXISTS execs_sched ON execs (scheduled_at);
CREATE INDEX IF NOT EXISTS execs_ended ON execs (terminal, live, updated_at);
CREATE INDEX IF NOT EXISTS execs_live ON execs (shard, id) WHERE live = 1;
CREATE INDEX IF NOT EXISTS execs_pending ON execs (scheduled_at) WHERE state = 'PENDING';
CREATE TABLE IF NOT EXISTS jobs (
	job_id     TEXT PRIMARY KEY,
	retired_at INTEGER NOT NULL,
	body       BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_retired ON jobs (retired_at);
CREATE TABLE IF NOT EXISTS cursor (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO cursor (id, seq) VALUES (1, 0);
`

// historyDrop removes the tables of an index of another version.
const historyDrop = `
DROP TABLE IF EXISTS execs;
DROP TABLE IF EXISTS bodies;
DROP TABLE IF EXISTS jobs;
DROP TABLE IF EXISTS cursor;
`

// Open opens (creating if needed) the index at path; an empty
// path keeps it in memory (one connection for reads and writes).
func Open(ctx context.Context, path string, shards int) (*Index, error) {
	h := &Index{shards: shards}
	var err error
	if path == "" {
		if h.wdb, err = sql.Open("sqlite", "file::memory:"); err != nil {
			return nil, fmt.Errorf("open history index: %w", err)
		}
		h.wdb.SetMaxOpenConns(1)
		h.wdb.SetConnMaxLifetime(0)
		h.rdb = h.wdb
	} else {
		if h.wdb, err = sql.Open("sqlite", historyDSN(path, false)); err != nil {
			return nil, fmt.Errorf("open history index %s: %w", path, err)
		}
		h.wdb.SetMaxOpenConns(1)
		h.wdb.SetConnMaxLifetime(0)
		if h.rdb, err = sql.Open("sqlite", historyDSN(path, true)); err != nil {
			_ = h.wdb.Close()
			return nil, fmt.Errorf("open history index %s: %w", path, err)
		}
		h.rdb.SetMaxOpenConns(4)
		h.rdb.SetConnMaxIdleTime(readerIdle)
	}
	if err := h.migrate(ctx); err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("open history index %s: schema: %w", path, err)
	}
	return h, nil
}

// migrate creates the schema, first dropping the tables of an index of
// another version (its cursor goes with them, so the follower rebuilds it
// from the stream).
func (h *Index) migrate(ctx context.Context) error {
	var v int
	if err := h.wdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	var tables int
	if err := h.wdb.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table'").Scan(&tables); err != nil {
		return err
	}
	if v != Version && tables > 0 {
		h.rebuilt = true
		if _, err := h.wdb.ExecContext(ctx, historyDrop); err != nil {
			return err
		}
	}
	if _, err := h.wdb.ExecContext(ctx, historySchema); err != nil {
		return err
	}
	_, err := h.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", Version))
	return err
}

func historyDSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "temp_store(MEMORY)")
	// Checkpoint every 64 MiB of WAL instead of 4: the pages a batch
	// touches in the random indexes are touched again by the next ones,
	// and are copied to the file once per checkpoint.
	q.Add("_pragma", "wal_autocheckpoint(16384)")
	// Inserts land all over six b-trees: a page cache that holds their
	// upper levels saves a read per page (32 MiB writer, 8 MiB each reader).
	if readOnly {
		q.Add("_pragma", "cache_size(-8192)")
	} else {
		q.Add("_pragma", "cache_size(-32768)")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Rebuilt reports whether Open found an index of another version and
// emptied it (the caller rebuilds it from AX_EVT).
func (h *Index) Rebuilt() bool { return h.rebuilt }

// Close closes the index's connections.
func (h *Index) Close() error {
	err := h.wdb.Close()
	if h.rdb != h.wdb {
		err = errors.Join(err, h.rdb.Close())
	}
	return err
}

// Cursor returns the AX_EVT sequence applied last (0: none).
func (h *Index) Cursor(ctx context.Context) (uint64, error) {
	var seq uint64
	if err := h.wdb.QueryRowContext(ctx, "SELECT seq FROM cursor WHERE id = 1").Scan(&seq); err != nil {
		return 0, fmt.Errorf("history index: read cursor: %w", err)
	}
	return seq, nil
}

// Reset empties the index (the stream was recreated: rebuild from it).
func (h *Index) Reset(ctx context.Context) error {
	_, err := h.wdb.ExecContext(ctx, "DELETE FROM execs; DELETE FROM bodies; DELETE FROM jobs; UPDATE cursor SET seq = 0 WHERE id = 1")
	if err != nil {
		return fmt.Errorf("history index: reset: %w", err)
	}
	return nil
}

// Item is one AX_EVT message decoded: an execution snapshot or a
// retired job (exactly one is set).
type Item struct {
	Exec *protocol.Execution
	Job  *protocol.JobRetired
	// Seq is the item's AX_EVT sequence (Holdback orders by it; Apply
	// does not read it).
	Seq uint64
}

// Ended is an execution the index saw terminal and not yet removed from
// live state.
type Ended struct{ ExecID, JobID string }

// EndedBefore returns up to n executions of the given shards that were
// terminal as of updated_at before cutoff and are still marked live.
func (h *Index) EndedBefore(ctx context.Context, cutoff time.Time, shards []int, n int) ([]Ended, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(shards)), ",")
	args := []any{cutoff.UnixNano()}
	for _, s := range shards {
		args = append(args, s)
	}
	args = append(args, n)
	rows, err := h.rdb.QueryContext(ctx, "SELECT exec_id, job_id FROM execs WHERE terminal = 1 AND live = 1 AND updated_at < ? AND shard IN ("+in+") ORDER BY updated_at LIMIT ?", args...)
	if err != nil {
		return nil, fmt.Errorf("history index: ended executions: %w", err)
	}
	defer rows.Close()
	var out []Ended
	for rows.Next() {
		var e Ended
		if err := rows.Scan(&e.ExecID, &e.JobID); err != nil {
			return nil, fmt.Errorf("history index: ended executions: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// MarkGone records that executions left live state (ax_execs), in one
// transaction.
func (h *Index) MarkGone(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	tx, err := h.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("history index: mark gone: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	st, err := tx.PrepareContext(ctx, "UPDATE execs SET live = 0 WHERE exec_id = ?")
	if err != nil {
		return fmt.Errorf("history index: mark gone: %w", err)
	}
	defer st.Close()
	for _, id := range ids {
		if _, err := st.ExecContext(ctx, id); err != nil {
			return fmt.Errorf("history index: mark %s gone: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("history index: mark gone: %w", err)
	}
	return nil
}

// JobsDone returns which of jobs ids have executions in the index, all of
// them terminal and gone from live state; an id that is not in the map has
// none, or one still open. It asks jobsDoneChunk ids a query (one query a
// job, re-parsed each time, was a fifth of a sweep's CPU).
func (h *Index) JobsDone(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), jobsDoneChunk)
		if err := h.jobsDone(ctx, ids[:n], out); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

// jobsDoneChunk is how many job ids JobsDone asks in one query.
const jobsDoneChunk = 500

// jobsDone adds to out the jobs of ids that are done (JobsDone). A job's
// executions are found by exec id range (jobRange) on the exec id index,
// as a list by job does.
func (h *Index) jobsDone(ctx context.Context, ids []string, out map[string]bool) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("history index: executions of jobs: %w", err)
	}
	rows, err := h.rdb.QueryContext(ctx, `SELECT j.value, sum(e.terminal = 0 OR e.live = 1) FROM json_each(?) AS j
		JOIN execs AS e ON e.exec_id >= j.value || '-' AND e.exec_id < j.value || '.' AND e.job_id = j.value
		GROUP BY j.value`, string(list))
	if err != nil {
		return fmt.Errorf("history index: executions of jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var open int64
		if err := rows.Scan(&id, &open); err != nil {
			return fmt.Errorf("history index: executions of jobs: %w", err)
		}
		if open == 0 {
			out[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("history index: executions of jobs: %w", err)
	}
	return nil
}

// Prune removes terminal executions last updated before cutoff, and jobs
// retired before jobCutoff, at most n rows of each per call; it returns
// how many rows went. Rows of the owned shards still marked live stay:
// this replica's sweeper has not removed them from ax_execs yet, and
// finds them here.
func (h *Index) Prune(ctx context.Context, cutoff, jobCutoff time.Time, owned []int, n int) (int64, error) {
	tx, err := h.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("history index: prune executions: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	old := "SELECT id FROM execs WHERE terminal = 1 AND live IN (0, 1) AND updated_at < ?"
	args := []any{cutoff.UnixNano()}
	if len(owned) > 0 {
		old += " AND (live = 0 OR shard NOT IN (" + strings.TrimSuffix(strings.Repeat("?,", len(owned)), ",") + "))"
		for _, s := range owned {
			args = append(args, s)
		}
	}
	old += " LIMIT ?"
	args = append(args, n)
	if _, err := tx.ExecContext(ctx, "DELETE FROM bodies WHERE id IN ("+old+")", args...); err != nil {
		return 0, fmt.Errorf("history index: prune executions: %w", err)
	}
	r, err := tx.ExecContext(ctx, "DELETE FROM execs WHERE id IN ("+old+")", args...)
	if err != nil {
		return 0, fmt.Errorf("history index: prune executions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("history index: prune executions: %w", err)
	}
	gone, _ := r.RowsAffected()
	r, err = h.wdb.ExecContext(ctx, "DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs WHERE retired_at < ? LIMIT ?)", jobCutoff.UnixNano(), n)
	if err != nil {
		return gone, fmt.Errorf("history index: prune jobs: %w", err)
	}
	jobs, _ := r.RowsAffected()
	return gone + jobs, nil
}

// RetiredAt returns when job id was retired; ok is false when the index
// holds no such retired job.
func (h *Index) RetiredAt(ctx context.Context, id string) (at time.Time, ok bool, err error) {
	var ns int64
	err = h.rdb.QueryRowContext(ctx, "SELECT retired_at FROM jobs WHERE job_id = ?", id).Scan(&ns)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("history index: retired job %s: %w", id, err)
	}
	return time.Unix(0, ns).UTC(), true, nil
}

// RetiredJobs returns retired jobs with id > after, ordered by id, for
// which keep is true, up to limit.
func (h *Index) RetiredJobs(ctx context.Context, after string, limit int, keep func(protocol.Job) bool) ([]protocol.Job, error) {
	rows, err := h.rdb.QueryContext(ctx, "SELECT body FROM jobs WHERE job_id > ? ORDER BY job_id", after)
	if err != nil {
		return nil, fmt.Errorf("history index: retired jobs: %w", err)
	}
	defer rows.Close()
	var out []protocol.Job
	for rows.Next() && len(out) < limit {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("history index: retired jobs: %w", err)
		}
		var j protocol.Job
		if err := storedjson.Unmarshal(body, &j); err != nil {
			return nil, fmt.Errorf("history index: retired jobs: decode: %w", err)
		}
		if keep(j) {
			out = append(out, j)
		}
	}
	return out, rows.Err()
}

// Len returns how many executions the index holds.
func (h *Index) Len(ctx context.Context) (int, error) {
	var n int
	if err := h.rdb.QueryRowContext(ctx, "SELECT count(*) FROM execs").Scan(&n); err != nil {
		return 0, fmt.Errorf("history index: count: %w", err)
	}
	return n, nil
}

// CloseReads closes the connections the reads (List, Get, Stamps, ...)
// use, so that every read fails from then on; the writes go on. A test
// shows with it that a path reads nothing from the index.
func (h *Index) CloseReads() error {
	if h.rdb == h.wdb {
		return errors.New("history index: in memory, reads and writes share one connection")
	}
	return h.rdb.Close()
}
