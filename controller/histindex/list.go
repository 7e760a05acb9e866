package histindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// The history index's reads for the API: a page of executions by filter,
// and one execution by id (index.go has the schema and the writes).

// Filter selects executions; the zero value selects all of them.
type Filter struct {
	// State matches executions in this state.
	State protocol.State
	// JobID matches executions of this job.
	JobID string
	// Agent matches executions whose current attempt runs on this agent.
	Agent string
	// After is the last exec id of the previous page; executions are
	// ordered by exec id.
	After string
	// From, when set, matches executions scheduled at or after it.
	From time.Time
	// To, when set, matches executions scheduled before it.
	To time.Time
}

// List returns up to limit executions matching f, ordered by exec id.
func (h *Index) List(ctx context.Context, f Filter, limit int) ([]protocol.Execution, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.After != "" {
		add("exec_id > ?", f.After)
	}
	if f.JobID != "" {
		lo, hi := jobRange(f.JobID)
		add("exec_id >= ?", lo)
		add("exec_id < ?", hi)
		add("job_id = ?", f.JobID)
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if f.State != "" {
		add("state = ?", string(f.State))
	}
	if !f.From.IsZero() || !f.To.IsZero() {
		from, to := int64(math.MinInt64), int64(math.MaxInt64)
		if !f.From.IsZero() {
			from = f.From.UnixNano()
		}
		if !f.To.IsZero() {
			to = f.To.UnixNano()
		}
		// A range alone: a narrow one is read from the scheduled_at index
		// and sorted (few rows); a wide one (rangeDense rows or more) by
		// exec id, filtered, which finds a page of them after reading
		// about limit × rows/rangeDense.
		col := "scheduled_at"
		if len(where) == 0 || (len(where) == 1 && f.After != "") {
			dense, err := h.rangeDense(ctx, from, to)
			if err != nil {
				return nil, err
			}
			if dense {
				col = "+scheduled_at" // not the index: keeps the exec id order
			}
		}
		add(col+" >= ?", from)
		add(col+" < ?", to)
	}
	// Two steps: the page's exec ids from an index alone (SQLite keeps the
	// first limit of them in exec id order, without reading the rows),
	// then the rows of that page.
	q := "SELECT exec_id FROM execs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY exec_id LIMIT ?"
	args = append(args, limit)
	ids, err := h.strings(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("history index: list: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	in := make([]any, len(ids))
	for i, id := range ids {
		in[i] = id
	}
	rows, err := h.rdb.QueryContext(ctx, "SELECT b.body FROM execs e JOIN bodies b ON b.id = e.id WHERE e.exec_id IN ("+
		strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+") ORDER BY e.exec_id", in...)
	if err != nil {
		return nil, fmt.Errorf("history index: list: %w", err)
	}
	defer rows.Close()
	out := make([]protocol.Execution, 0, len(ids))
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("history index: list: %w", err)
		}
		var e protocol.Execution
		if err := storedjson.Unmarshal(body, &e); err != nil {
			return nil, fmt.Errorf("history index: list: decode: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history index: list: %w", err)
	}
	return out, nil
}

// jobRange returns the exec ids [lo, hi) among which those of job id lie:
// every one is id + "-" + a number (protocol.ExecID), and '.' follows '-'.
// Another job's id may start with id + "-", so a query also checks job_id.
func jobRange(id string) (lo, hi string) { return id + "-", id + "." }

// rangeDense is the number of rows in a scheduled range from which a list
// scans by exec id instead of sorting the range.
const rangeDense = 5000

// rangeDense reports whether [from, to) holds rangeDense rows or more
// (counted on the index, at most rangeDense of them).
func (h *Index) rangeDense(ctx context.Context, from, to int64) (bool, error) {
	var n int
	err := h.rdb.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM execs WHERE scheduled_at >= ? AND scheduled_at < ? LIMIT ?)",
		from, to, rangeDense).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("history index: list: %w", err)
	}
	return n >= rangeDense, nil
}

// strings runs a query of one text column.
func (h *Index) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := h.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Get returns the indexed snapshot of an execution (false: none).
func (h *Index) Get(ctx context.Context, id string) (protocol.Execution, bool, error) {
	var body []byte
	err := h.rdb.QueryRowContext(ctx, "SELECT b.body FROM execs e JOIN bodies b ON b.id = e.id WHERE e.exec_id = ?", id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return protocol.Execution{}, false, nil
	}
	if err != nil {
		return protocol.Execution{}, false, fmt.Errorf("history index: get %s: %w", id, err)
	}
	var e protocol.Execution
	if err := storedjson.Unmarshal(body, &e); err != nil {
		return protocol.Execution{}, false, fmt.Errorf("history index: get %s: decode: %w", id, err)
	}
	return e, true, nil
}
