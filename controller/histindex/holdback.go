package histindex

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// Holdback keeps the snapshots of live executions (not terminal) out of
// the index for a while, waiting for the snapshot that supersedes them.
// A one-shot run's PENDING snapshot reaches AX_EVT when its job is made
// and its finished one a fraction of a second later (another batch): both
// were written, the first as a new row in every index of the table, the
// second as an update of all of them. Held back, the first is dropped
// when the second comes, and the execution costs one row write.
//
// The follower (controller/history.go) passes every decoded batch through
// Split, writes what it returns, and writes what Due or All return when a
// snapshot has waited long enough, too many wait, or a reader needs the
// index current (All). The index's cursor may then only move to the
// message before the oldest snapshot still held (Cursor): a restart reads
// the held ones again from the stream, and Apply's upsert ignores what it
// already has.
//
// Not safe for concurrent use: the follower goroutine owns it. Time is
// passed in, as the follower reads it.
type Holdback struct {
	byID  map[string]heldSnap // exec id → the newest snapshot held
	order []heldRef           // held in stream order; entries replaced or taken are skipped
	head  int                 // order[:head] are spent
}

type heldSnap struct {
	it  Item
	seq uint64
	at  time.Time
}

type heldRef struct {
	id  string
	seq uint64
}

// NewHoldback returns an empty Holdback.
func NewHoldback() *Holdback { return &Holdback{byID: map[string]heldSnap{}} }

// Len is the number of snapshots held.
func (h *Holdback) Len() int { return len(h.byID) }

// Split takes a batch in stream order (each Item's Seq set) and returns,
// in place, what is to be written now: job retirements, terminal
// snapshots, and the snapshots of live executions whose next step is not
// due before quiet (Quiet: a PENDING execution scheduled later, one in
// RETRY_WAITING whose next attempt is later); each drops the snapshot its
// execution had held (a live one only when it Supersedes it: an older
// step read after a newer held one is dropped). The other snapshots of
// live executions are held, each replacing the one its execution had held
// when it Supersedes it.
// now is the follower's clock (the time a snapshot is held since); quiet
// is a wall-clock time, compared with the snapshots' own times.
func (h *Holdback) Split(batch []Item, now, quiet time.Time) []Item {
	out := batch[:0]
	for _, it := range batch {
		if it.Exec == nil || it.Exec.State.Terminal() {
			if it.Exec != nil {
				delete(h.byID, it.Exec.ExecID)
			}
			out = append(out, it)
			continue
		}
		id := it.Exec.ExecID
		if old, ok := h.byID[id]; ok && !Supersedes(it.Exec, old.it.Exec) {
			continue // an older step read after a newer one: the index would ignore it
		}
		if Quiet(it.Exec, quiet) {
			delete(h.byID, id)
			out = append(out, it)
			continue
		}
		h.byID[id] = heldSnap{it: it, seq: it.Seq, at: now}
		h.order = append(h.order, heldRef{id: id, seq: it.Seq})
	}
	clear(batch[len(out):])
	return out
}

// Quiet reports whether nothing but an operator or a lost agent can change
// execution e before the wall-clock time quiet: it waits in PENDING for a
// fire scheduled after quiet, or in RETRY_WAITING for a next attempt after
// it. Holding such a snapshot back saves nothing (nothing supersedes it
// within the hold) and makes the commit that a reader waits for write it
// (after a burst of delayed creates: every create of the last seconds).
func Quiet(e *protocol.Execution, quiet time.Time) bool {
	switch e.State {
	case protocol.StatePending:
		return e.ScheduledAt.After(quiet)
	case protocol.StateRetryWaiting:
		return e.NextAttemptAt.After(quiet)
	}
	return false
}

// Due removes and appends to dst the snapshots held since before cutoff,
// and the oldest beyond max held; it returns dst.
func (h *Holdback) Due(dst []Item, cutoff time.Time, max int) []Item {
	for h.head < len(h.order) {
		r := h.order[h.head]
		s, ok := h.byID[r.id]
		if ok && s.seq == r.seq {
			if !s.at.Before(cutoff) && len(h.byID) <= max {
				break
			}
			delete(h.byID, r.id)
			dst = append(dst, s.it)
		}
		h.head++
	}
	h.compact()
	return dst
}

// All removes and appends to dst every snapshot held, in stream order.
func (h *Holdback) All(dst []Item) []Item {
	for _, r := range h.order[h.head:] {
		if s, ok := h.byID[r.id]; ok && s.seq == r.seq {
			dst = append(dst, s.it)
		}
	}
	clear(h.byID)
	clear(h.order)
	h.order, h.head = h.order[:0], 0
	return dst
}

// Cursor is the stream sequence the index may record as applied after
// writing everything up to last: last when nothing is held, else the one
// before the oldest snapshot held.
func (h *Holdback) Cursor(last uint64) uint64 {
	for h.head < len(h.order) {
		r := h.order[h.head]
		if s, ok := h.byID[r.id]; ok && s.seq == r.seq {
			return min(last, r.seq-1)
		}
		h.head++
	}
	h.compact()
	return last
}

// compact drops the spent front of order once it is most of it.
func (h *Holdback) compact() {
	if h.head == len(h.order) {
		clear(h.order)
		h.order, h.head = h.order[:0], 0
		return
	}
	if h.head > 1024 && h.head > len(h.order)/2 {
		n := copy(h.order, h.order[h.head:])
		clear(h.order[n:])
		h.order, h.head = h.order[:n], 0
	}
}
