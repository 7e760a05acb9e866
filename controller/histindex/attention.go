package histindex

import (
	"context"
	"fmt"
	"time"
)

// Attention returns the exec ids of the live rows whose execution a
// shard's reload must read whole, whatever their age (controller's
// reloadindex.go): those TRIGGERED, RUNNING or RETRY_WAITING, those
// PENDING without an agent, and those PENDING scheduled at or before due.
// The rest of the live rows are PENDING on an agent and due later: an
// execution no agent can have run yet. It returns at most limit ids, and
// false when there are more (the caller then reads every execution
// instead).
//
// Each set is read from an index of its own (state, agent, and the
// partial index of PENDING rows by scheduled time; named, since without
// statistics SQLite takes the index by state for the PENDING ones and
// reads all 300,000 delayed rows: 0.5 s), so the cost follows the rows
// returned.
func (h *Index) Attention(ctx context.Context, due time.Time, limit int) ([]string, bool, error) {
	queries := []struct {
		q    string
		args []any
	}{
		{"SELECT exec_id FROM execs WHERE state = 'TRIGGERED' AND live = 1 LIMIT ?", nil},
		{"SELECT exec_id FROM execs WHERE state = 'RUNNING' AND live = 1 LIMIT ?", nil},
		{"SELECT exec_id FROM execs WHERE state = 'RETRY_WAITING' AND live = 1 LIMIT ?", nil},
		{"SELECT exec_id FROM execs INDEXED BY execs_agent WHERE agent = '' AND state = 'PENDING' AND live = 1 LIMIT ?", nil},
		{"SELECT exec_id FROM execs INDEXED BY execs_pending WHERE state = 'PENDING' AND scheduled_at <= ? AND agent != '' AND live = 1 LIMIT ?", []any{due.UnixNano()}},
	}
	var out []string
	for _, q := range queries {
		args := append(q.args, limit-len(out)+1)
		ids, err := h.strings(ctx, q.q, args...)
		if err != nil {
			return nil, false, fmt.Errorf("history index: attention: %w", err)
		}
		out = append(out, ids...)
		if len(out) > limit {
			return nil, false, nil
		}
	}
	return out, true, nil
}
