package agent

import (
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// Holding (outbox.hold). The linger coalesces the steps of an attempt
// only when they are all written within it; an attempt that waits in the
// ready queue longer has its triggered report published alone, then
// running and finished, and the controller applies each. So the flusher
// holds back, for up to outbox.hold, the triggered or running report of
// an attempt of a run the controller sent or of a periodic fire
// (scheduler.Report.Hold; not under a group lease, whose moves follow
// the reports: a run of a lease holder killed in mid-run must be known so
// that it is run again elsewhere) written in this run of the process,
// until the attempt's next step is written. A periodic fire's record is
// then made by its first report to arrive, in the state that report
// brings (the later steps' reports carry the earlier steps' times):
//
//   - a running, finished or interrupted row of the attempt supersedes
//     the held one (it carries the earlier steps' times, as in a window):
//     the held row is not sent;
//   - any other row of the attempt (fenced) is published after the held
//     one, which goes first, in the same window;
//   - when the hold ends the held row is published: a long handler is
//     seen RUNNING at most outbox.hold after its attempt was triggered (a
//     running row that supersedes a held triggered one keeps the
//     triggered row's end of hold);
//   - when the link comes back (a registration) or the agent stops, every
//     held row goes at once, and rows written before are not held.
//
// Durability is unchanged: a held row is committed like any other, and
// stays in SQLite until its PubAck (or that of the row superseding it);
// the store deletes acknowledged rows only below the oldest held row
// (store.Tx.Ack deletes by seq). Rows read back from SQLite (an earlier
// run, a long partition, a burst that outran memOutbox's bound) are never
// held: the mark is not stored. A restart republishes the rows not
// deleted with their Msg-Ids (de-duplicated by AX_RPT).

// heldRow is an outbox row whose publish waits.
type heldRow struct {
	msg store.OutboxMsg
	key string    // attempt key of its Msg-Id (salt/exec_id/attempt)
	due time.Time // published at the latest then
	// inflight: published in a window waiting for its PubAcks.
	inflight bool
	// gone: superseded or acknowledged; removed at the next compaction.
	gone bool
}

// holds is the flusher's set of held rows, in seq order.
type holds struct {
	rows  []*heldRow
	byKey map[string]*heldRow // the newest held row of each attempt
	gone  int                 // rows marked gone, not compacted yet
	// through: rows with seq ≤ through are never held (they were written
	// before the link came back); all: nothing is held (shutdown).
	through int64
	all     bool
}

func newHolds() *holds { return &holds{byKey: map[string]*heldRow{}} }

// holdable reports whether m, of this kind, just read from memory
// (fromMem), is held back for d.
func (h *holds) holdable(m store.OutboxMsg, kind protocol.ReportKind, fromMem bool, d time.Duration) bool {
	if d <= 0 || !fromMem || !m.Hold || h.all || m.Seq <= h.through {
		return false
	}
	return kind == protocol.ReportTriggered || kind == protocol.ReportRunning
}

// add holds m until due.
func (h *holds) add(m store.OutboxMsg, key string, due time.Time) {
	r := &heldRow{msg: m, key: key, due: due}
	h.rows = append(h.rows, r)
	h.byKey[key] = r
}

// drop forgets r (superseded, or published and acknowledged).
func (h *holds) drop(r *heldRow) {
	if r.gone {
		return
	}
	r.gone = true
	h.gone++
	if h.byKey[r.key] == r {
		delete(h.byKey, r.key)
	}
	if h.gone > 64 && h.gone > len(h.rows)/2 {
		h.compact()
	}
}

func (h *holds) compact() {
	kept := h.rows[:0]
	for _, r := range h.rows {
		if !r.gone {
			kept = append(kept, r)
		}
	}
	clear(h.rows[len(kept):])
	h.rows, h.gone = kept, 0
}

// minSeq is the lowest seq held (ok false when none is).
func (h *holds) minSeq() (int64, bool) {
	for _, r := range h.rows {
		if !r.gone {
			return r.msg.Seq, true
		}
	}
	return 0, false
}

// releaseAll ends every hold now and holds no row with seq ≤ through.
func (h *holds) releaseAll(through int64) {
	h.through = max(h.through, through)
	for _, r := range h.rows {
		r.due = time.Time{}
	}
}

// reset forgets the publishes in flight (their windows are sent again).
func (h *holds) reset() {
	for _, r := range h.rows {
		r.inflight = false
	}
}

// nextDue is the earliest end of hold of a row not published yet (ok
// false when none waits).
func (h *holds) nextDue() (due time.Time, ok bool) {
	for _, r := range h.rows {
		if r.gone || r.inflight {
			continue
		}
		if !ok || r.due.Before(due) {
			due, ok = r.due, true
		}
	}
	return due, ok
}

// supersedes reports whether a row of kind carries the steps of an
// earlier triggered or running row of its attempt (coalesce).
func supersedes(kind protocol.ReportKind) bool {
	switch kind {
	case protocol.ReportRunning, protocol.ReportFinished, protocol.ReportInterrupted:
		return true
	}
	return false
}

// wait is how long the flusher sleeps when it has nothing to do: until
// the next hold ends, at most a second; a second after a failure or while
// the link is down (held rows cannot go then).
func (f *flusher) wait() time.Duration {
	const idle = time.Second
	if f.fails > 0 {
		return idle
	}
	if _, up := f.l.ready(); !up || !f.l.reg.Load() {
		return idle
	}
	due, ok := f.holds.nextDue()
	if !ok {
		return idle
	}
	return min(idle, max(due.Sub(f.a.clk.Now()), time.Millisecond))
}
