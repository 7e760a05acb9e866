package store

import (
	"context"
	"fmt"
)

// SetOutboxSink hands every outbox row committed from now on to sink, so
// that reports can be published from memory once durable, without reading
// them back. It returns base: every row with seq ≤ base was in the outbox
// before and is not handed over (read those with Outbox); every row
// committed later has a higher seq and is.
//
// sink runs on the writer goroutine after each committed batch (after
// the batch's callbacks), with the batch's new rows in seq order; it must
// be quick and must not write to the store. It must not change the rows.
func (s *Store) SetOutboxSink(ctx context.Context, sink func([]OutboxMsg)) (base int64, err error) {
	ch := make(chan error, 1)
	err = s.submit(ctx, func(tx *Tx) error {
		return tx.tx.QueryRowContext(tx.ctx, "SELECT COALESCE(MAX(seq), 0) FROM outbox").Scan(&base)
	}, func(err error) {
		if err == nil {
			// On the writer goroutine, before this batch's rows are
			// delivered: rows after base in it are handed over too.
			s.w.sink, s.w.sinkBase = sink, base
		}
		ch <- err
	})
	if err == nil {
		select {
		case err = <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("set outbox sink: %w", classify(err))
	}
	return base, nil
}

// deliver hands a committed batch's outbox rows to the sink.
func (w *writer) deliver(rows []OutboxMsg) {
	if w.sink == nil || len(rows) == 0 {
		return
	}
	i := 0
	for i < len(rows) && rows[i].Seq <= w.sinkBase {
		i++
	}
	if i < len(rows) {
		w.sink(rows[i:])
	}
}
