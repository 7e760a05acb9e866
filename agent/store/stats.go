package store

import "sync/atomic"

// Stats counts the writer's work since Open.
type Stats struct {
	// Commits is the number of write transactions committed (each is one
	// WAL fsync with synchronous=FULL; checkpoints add their own).
	Commits int64
	// Writes is the number of write functions run in committed
	// transactions (Do, Submit, TrySubmit calls).
	Writes int64
	// Statements is the number of SQL statements the committed write
	// transactions ran (each prepared statement execution counts one; a
	// multi-row statement counts one; BEGIN and COMMIT do not count).
	Statements int64
	// OutboxReads is the number of reads of outbox rows (Store.Outbox).
	OutboxReads int64
	// ExecRowsRead is the number of attempt rows read back by LiveExecs
	// (restart recovery and reloads of a spilled ready queue).
	ExecRowsRead int64
}

type stats struct {
	commits, writes, statements, outboxReads, execRowsRead atomic.Int64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.stats.commits.Load(), Writes: s.stats.writes.Load(), Statements: s.stats.statements.Load(),
		OutboxReads: s.stats.outboxReads.Load(), ExecRowsRead: s.stats.execRowsRead.Load()}
}
