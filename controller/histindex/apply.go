package histindex

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/axsched/ax/pkg/protocol"
)

// applyChunk is how many snapshots one statement writes. A statement per
// row spent about a fifth of Apply in database/sql and the driver
// (binding, a cursor, RETURNING's scan). BenchmarkHistoryIndexApply
// (batches of 1,000 new rows) read 13,100–13,300 rows/s with one statement
// per row; with chunks of 16, 32, 64, 128 and 256 rows 16,000–16,300,
// 16,500, 16,700–17,200, 15,000 and 8,800–9,400: past 64 rows a statement
// costs SQLite more per row.
const applyChunk = 64

// execCols are the columns a snapshot writes, in the order execArgs gives
// them.
const execCols = "(exec_id, job_id, agent, state, scheduled_at, updated_at, terminal, shard, progress)"

// A snapshot is written by two statements instead of one upsert: an
// INSERT OR IGNORE of every row (RETURNING names the new ones) and, for the
// rows that existed, an UPDATE OR FAIL that replaces a row only with a
// snapshot that supersedes it (batch.go; RETURNING names the rows
// updated, none for a snapshot older than the stored one). An upsert's
// DO UPDATE may abort midway, so SQLite kept a statement journal for each
// (a copy of every page it changed): 14 % of BenchmarkHistoryIndexApply's
// profile. Neither of these can abort midway (IGNORE skips, FAIL leaves
// what was done, and Apply rolls the transaction back on any error), so
// SQLite keeps none: BenchmarkHistoryIndexApply read 18,400–18,800 rows/s
// with the upsert and 20,000–23,500 with these, alternated (stop 47).
const execUpdate = `UPDATE OR FAIL execs SET job_id = v.column2, agent = v.column3, state = v.column4,
		scheduled_at = v.column5, updated_at = v.column6, terminal = v.column7, progress = v.column9
	FROM (VALUES %s) AS v
	WHERE execs.exec_id = v.column1
		AND (v.column6 > execs.updated_at OR (v.column6 = execs.updated_at AND v.column9 >= execs.progress))
	RETURNING execs.exec_id, execs.id`

// Apply stores items and moves the cursor to seq, in one transaction. A
// snapshot replaces the row only when it supersedes it (batch.go: newer
// updated_at, or the same one and at least as far along), so events
// re-published out of order change nothing. items is narrowed in place
// to the newest snapshot of each execution (LatestOnly).
func (h *Index) Apply(ctx context.Context, items []Item, seq uint64) error {
	tx, err := h.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("history index: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// Of the snapshots of one execution in the batch (the steps of one
	// report come together) only the newest counts (LatestOnly), so one
	// statement never names an execution twice.
	var execs []*protocol.Execution
	for _, it := range LatestOnly(items) {
		switch {
		case it.Exec != nil:
			execs = append(execs, it.Exec)
		case it.Job != nil:
			body, err := json.Marshal(it.Job.Job)
			if err != nil {
				return fmt.Errorf("history index: encode job %s: %w", it.Job.Job.ID, err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO jobs (job_id, retired_at, body) VALUES (?, ?, ?)",
				it.Job.Job.ID, it.Job.At.UnixNano(), body); err != nil {
				return fmt.Errorf("history index: store job %s: %w", it.Job.Job.ID, err)
			}
		}
	}
	for len(execs) > 0 {
		n := min(len(execs), applyChunk)
		if err := h.writeExecs(ctx, tx, execs[:n]); err != nil {
			return err
		}
		execs = execs[n:]
	}
	if _, err := tx.ExecContext(ctx, "UPDATE cursor SET seq = ? WHERE id = 1", seq); err != nil {
		return fmt.Errorf("history index: store cursor: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("history index: commit: %w", err)
	}
	return nil
}

// writeExecs writes the snapshots es (distinct executions): one statement
// inserts the new rows, one updates the rows they supersede, and one
// writes the bodies of the rows written.
func (h *Index) writeExecs(ctx context.Context, tx *sql.Tx, es []*protocol.Execution) error {
	args := make([]any, 0, 9*len(es))
	for _, e := range es {
		args = execArgs(args, e, h.shards)
	}
	ids := make(map[string]int64, len(es))
	if err := scanIDs(ctx, tx, ids, "INSERT OR IGNORE INTO execs "+execCols+" VALUES "+placeholders(len(es), 9)+" RETURNING exec_id, id", args); err != nil {
		return fmt.Errorf("history index: store %d executions from %s: %w", len(es), es[0].ExecID, err)
	}
	if len(ids) < len(es) {
		args = args[:0]
		n := 0
		for _, e := range es {
			if _, ok := ids[e.ExecID]; !ok {
				args = execArgs(args, e, h.shards)
				n++
			}
		}
		if err := scanIDs(ctx, tx, ids, fmt.Sprintf(execUpdate, placeholders(n, 9)), args); err != nil {
			return fmt.Errorf("history index: update %d executions: %w", n, err)
		}
	}
	if len(ids) == 0 {
		return nil // the index holds newer snapshots of them all
	}
	args = args[:0]
	for _, e := range es {
		id, ok := ids[e.ExecID]
		if !ok {
			continue // the index holds a newer snapshot
		}
		body, err := e.AppendJSON(make([]byte, 0, 1024)) // json.Marshal's bytes, by hand (protocol.Execution)
		if err != nil {
			return fmt.Errorf("history index: encode %s: %w", e.ExecID, err)
		}
		args = append(args, id, body)
	}
	if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO bodies (id, body) VALUES "+placeholders(len(ids), 2), args...); err != nil {
		return fmt.Errorf("history index: store the bodies of %d executions: %w", len(ids), err)
	}
	return nil
}

// execArgs appends e's values of execCols to args.
func execArgs(args []any, e *protocol.Execution, shards int) []any {
	return append(args, e.ExecID, e.JobID, e.Agent, string(e.State), e.ScheduledAt.UnixNano(),
		e.UpdatedAt.UnixNano(), e.State.Terminal(), protocol.Shard(e.JobID, shards), Progress(e))
}

// scanIDs runs query, whose rows are (exec_id, id), and adds them to ids.
func scanIDs(ctx context.Context, tx *sql.Tx, ids map[string]int64, query string, args []any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var execID string
		var id int64
		if err := rows.Scan(&execID, &id); err != nil {
			return err
		}
		ids[execID] = id
	}
	return rows.Err()
}

// placeholders returns n groups of k placeholders: "(?, ?), (?, ?)".
func placeholders(n, k int) string {
	group := "(" + strings.TrimSuffix(strings.Repeat("?, ", k), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(group+", ", n), ", ")
}
