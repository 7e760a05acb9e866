package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// writer is the store's one writing goroutine (run) and the state only it
// touches: the write connection and its prepared statements, the outbox
// seq counter and the outbox sink. Everything reaches it as a write
// function on reqs; SetOutboxSink sets the sink from a write's callback,
// which runs on this goroutine.
type writer struct {
	db    *sql.DB // one connection
	st    *stmts
	opts  Options
	path  string
	stats *stats
	reqs  chan req
	done  chan struct{} // closed when run returns
	err   func() error  // the store's failure, if any (Store.Err)
	fail  func(error)   // marks the store failed (Store.fail)

	// sink gets the outbox rows of each committed batch with seq >
	// sinkBase (see SetOutboxSink).
	sink     func([]OutboxMsg)
	sinkBase int64
	// outboxSeq is the highest outbox seq ever used: the next batch's rows
	// get the seqs after it.
	outboxSeq int64

	// ackFloor is the highest outbox seq acknowledged (AckLater, any
	// goroutine); ackDone the highest a committed transaction deleted up
	// to (writer only); ackKick wakes the writer to time the delete.
	ackFloor atomic.Int64
	ackDone  int64
	ackKick  chan struct{}
}

// run runs the queued write functions in batches. While writes keep
// coming from several callers (the last batch had more than one write
// function, and the writer was idle for less than that batch took), it
// lingers before a batch: up to a quarter of the last batch's duration,
// at most Options.Linger, or until the batch is full. The steps of many
// executions then share one commit (one fsync) instead of the first
// write of a burst taking a commit of its own while the rest queue behind
// it. A write after a quiet spell, or from a lone caller writing one
// after the other, is committed at once. Every commit also deletes the
// outbox rows acknowledged with AckLater; when they wait Options.AckDelay
// with no write to join, or the store closes, they are committed alone.
func (w *writer) run() {
	defer close(w.done)
	batch := make([]req, 0, w.opts.MaxBatch)
	errs := make([]error, 0, w.opts.MaxBatch)
	var last time.Duration // how long the last batch took
	lastN := 0             // and how many write functions it had
	clk := w.opts.Clock
	lastEnd := clk.Now()
	linger := clk.NewTimer(time.Hour)
	linger.Stop()
	// ackWait runs while acknowledged rows wait for a commit (AckLater).
	ackWait := clk.NewTimer(time.Hour)
	ackWait.Stop()
	ackArmed := false
	for {
		var r req
		select {
		case next, ok := <-w.reqs:
			if !ok {
				w.commitAcks()
				return
			}
			r = next
		case <-w.ackKick:
			if !ackArmed && w.acksPending() {
				ackWait.Reset(w.opts.AckDelay)
				ackArmed = true
			}
			continue
		case <-ackWait.C():
			ackArmed = false
			w.commitAcks()
			continue
		}
		start := clk.Now()
		batch = append(batch[:0], r)
		w.fill(&batch)
		if wait := min(last/4, w.opts.Linger); wait > 0 && lastN > 1 && len(batch) < w.opts.MaxBatch && start.Sub(lastEnd) < last {
			linger.Reset(wait)
		wait:
			for len(batch) < w.opts.MaxBatch {
				select {
				case r, ok := <-w.reqs:
					if !ok {
						break wait
					}
					batch = append(batch, r)
					w.fill(&batch)
				case <-linger.C():
					break wait
				}
			}
			linger.Stop()
			start = clk.Now()
		}
		lastN = len(batch)
		var rows []OutboxMsg
		errs, rows = w.commit(batch, errs[:0])
		for i, r := range batch {
			if r.done != nil {
				r.done(errs[i])
			}
			batch[i] = req{}
		}
		// After the callbacks: one of them may have set the sink.
		w.deliver(rows)
		lastEnd = clk.Now()
		last = lastEnd.Sub(start)
		if ackArmed && !w.acksPending() {
			ackWait.Stop()
			ackArmed = false
		}
	}
}

// fill adds the queued write functions to batch, up to MaxBatch, without
// waiting.
func (w *writer) fill(batch *[]req) {
	for len(*batch) < w.opts.MaxBatch {
		select {
		case r, ok := <-w.reqs:
			if !ok {
				return
			}
			*batch = append(*batch, r)
		default:
			return
		}
	}
}

// commit runs a batch in one transaction. Fast path: every function without
// savepoints. If one fails, the transaction is rolled back and the batch
// rerun with one savepoint per function.
func (w *writer) commit(batch []req, errs []error) ([]error, []OutboxMsg) {
	for range batch {
		errs = append(errs, nil)
	}
	if err := w.err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil
	}
	ok, rows, err := w.runBatch(batch, errs, false)
	if err == nil && !ok {
		for i := range errs {
			errs[i] = nil
		}
		_, rows, err = w.runBatch(batch, errs, true)
	}
	if err != nil {
		err = classify(err)
		if fatal(err) {
			w.fail(fmt.Errorf("store %s: %w", w.path, err))
		}
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		rows = nil
	}
	return errs, rows
}

// runBatch returns ok=false (after rolling back) when a function failed in
// the fast path; err is a transaction-level error; rows are the outbox
// rows the committed transaction wrote.
func (w *writer) runBatch(batch []req, errs []error, savepoints bool) (ok bool, rows []OutboxMsg, err error) {
	ctx := context.Background()
	sqlTx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return false, nil, fmt.Errorf("begin: %w", err)
	}
	tx := &Tx{tx: sqlTx, st: w.st, ctx: ctx}
	for i, r := range batch {
		if savepoints {
			if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
				_ = sqlTx.Rollback()
				return false, nil, err
			}
		}
		e := safeRun(r.fn, tx)
		tx.endFn(e == nil)
		if e != nil {
			if c := classify(e); fatal(c) {
				_ = sqlTx.Rollback()
				return false, nil, c
			}
			if !savepoints {
				_ = sqlTx.Rollback()
				return false, nil, nil
			}
			errs[i] = e
			if _, err := sqlTx.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
				_ = sqlTx.Rollback()
				return false, nil, err
			}
		}
		if savepoints {
			if _, err := sqlTx.ExecContext(ctx, "RELEASE w"); err != nil {
				_ = sqlTx.Rollback()
				return false, nil, err
			}
		}
	}
	seq, err := tx.flushOutbox(w.outboxSeq)
	if err != nil {
		_ = sqlTx.Rollback()
		return false, nil, classify(err)
	}
	acked, err := w.ackInTx(tx)
	if err != nil {
		_ = sqlTx.Rollback()
		return false, nil, classify(err)
	}
	if err := tx.flushMeta(); err != nil {
		_ = sqlTx.Rollback()
		return false, nil, classify(err)
	}
	if err := sqlTx.Commit(); err != nil {
		return false, nil, fmt.Errorf("commit: %w", err)
	}
	w.outboxSeq = seq
	w.ackDone = acked
	w.stats.commits.Add(1)
	w.stats.writes.Add(int64(len(batch)))
	w.stats.statements.Add(tx.n)
	return true, tx.rows, nil
}
