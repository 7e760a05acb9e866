package histindex

import (
	"context"
	"fmt"
	"strings"

	"github.com/axsched/ax/pkg/protocol"
)

// Stamp is what the index holds of an execution: the updated_at (Unix
// ns) and state of its newest snapshot.
type Stamp struct {
	At    int64
	State protocol.State
}

// Stamps returns, for the rows of the given shards still marked live, the
// exec id → stamp the index holds.
func (h *Index) Stamps(ctx context.Context, shards []int) (map[string]Stamp, error) {
	out := map[string]Stamp{}
	if len(shards) == 0 {
		return out, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(shards)), ",")
	args := make([]any, len(shards))
	for i, s := range shards {
		args[i] = s
	}
	rows, err := h.rdb.QueryContext(ctx, "SELECT exec_id, updated_at, state FROM execs WHERE live = 1 AND shard IN ("+in+")", args...)
	if err != nil {
		return nil, fmt.Errorf("history index: stamps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, state string
		var at int64
		if err := rows.Scan(&id, &at, &state); err != nil {
			return nil, fmt.Errorf("history index: stamps: %w", err)
		}
		out[id] = Stamp{At: at, State: protocol.State(state)}
	}
	return out, rows.Err()
}
