package histindex

import "github.com/axsched/ax/pkg/protocol"

// LatestOnly keeps, of the snapshots of one execution in batch, only the
// newest (supersedes: by updated_at, then progress, then the later in the
// stream), in place,
// and returns the shortened batch; job retirements are all kept. The
// index would drop an older snapshot anyway (apply's upsert keeps the
// newer row); this spares it the writes: under load one batch often holds
// the triggered, running and finished events of the same execution, which
// become one row write instead of three.
func LatestOnly(batch []Item) []Item {
	if len(batch) < 2 {
		return batch
	}
	last := make(map[string]int, len(batch))
	for i, it := range batch {
		if it.Exec == nil {
			continue
		}
		if k, ok := last[it.Exec.ExecID]; !ok || Supersedes(it.Exec, batch[k].Exec) {
			last[it.Exec.ExecID] = i
		}
	}
	if len(last) == len(batch) {
		return batch
	}
	out := batch[:0]
	for i, it := range batch {
		if it.Exec == nil || last[it.Exec.ExecID] == i {
			out = append(out, it)
		}
	}
	return out
}

// Progress orders the snapshots of one execution that share an
// updated_at: the steps one report applies at once (triggered, running,
// finished of a coalesced report) get the same updated_at, and their
// events may reach AX_EVT out of order (a replay of an earlier step's
// event after the last one's), so the attempt and how far the state is
// along decide: PENDING, TRIGGERED, RUNNING, RETRY_WAITING, then the
// terminal states.
func Progress(e *protocol.Execution) int64 {
	rank := 0
	switch e.State {
	case protocol.StatePending:
		rank = 1
	case protocol.StateTriggered:
		rank = 2
	case protocol.StateRunning:
		rank = 3
	case protocol.StateRetryWaiting:
		rank = 4
	default:
		if e.State.Terminal() {
			rank = 5
		}
	}
	return int64(e.Attempt)*8 + int64(rank)
}

// Supersedes reports whether snapshot a is to replace b, its execution's
// earlier one in the stream: a is newer, or as new and at least as far
// along (progress).
func Supersedes(a, b *protocol.Execution) bool {
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return a.UpdatedAt.After(b.UpdatedAt)
	}
	return Progress(a) >= Progress(b)
}
