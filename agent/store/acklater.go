package store

import "time"

// DefaultAckDelay is Options.AckDelay.
const DefaultAckDelay = time.Minute

// AckLater records that the outbox rows up to seq were acknowledged. They
// are deleted by the next commit of any write, inside its transaction,
// instead of by a commit of their own: at a few attempts a second every
// attempt's reports were acknowledged between its writes, and their
// delete was a fourth commit (a fourth fsync) per attempt. When no other
// write commits within Options.AckDelay, the writer commits the delete
// alone; Close commits it too. Until then Counts leaves the rows out. A
// crash before the delete leaves them to be sent again at the next start,
// which the controller takes as duplicates (their Msg-Ids, then their
// steps).
// AckLater never blocks and may be called from any goroutine; a seq at or
// below an earlier one is ignored.
func (s *Store) AckLater(seq int64) {
	for {
		cur := s.w.ackFloor.Load()
		if seq <= cur {
			return
		}
		if s.w.ackFloor.CompareAndSwap(cur, seq) {
			break
		}
	}
	select {
	case s.w.ackKick <- struct{}{}:
	default: // a kick is pending: the writer will see the new floor
	}
}

// acksPending reports whether rows were acknowledged (AckLater) that no
// commit has deleted yet. Writer goroutine only.
func (w *writer) acksPending() bool { return w.ackFloor.Load() > w.ackDone }

// ackInTx deletes, in tx, the rows acknowledged through AckLater and not
// deleted yet, and returns the floor it deleted up to (the writer records
// it once the transaction commits).
func (w *writer) ackInTx(tx *Tx) (int64, error) {
	floor := w.ackFloor.Load()
	if floor <= w.ackDone {
		return w.ackDone, nil
	}
	if err := tx.Ack(floor); err != nil {
		return 0, err
	}
	return floor, nil
}

// commitAcks commits the pending deletes of acknowledged rows in a
// transaction of their own (no write function).
func (w *writer) commitAcks() {
	if !w.acksPending() {
		return
	}
	_, _ = w.commit(nil, nil) // an error fails the store (commit) or is retried with the next write
}
