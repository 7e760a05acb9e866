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
	// OutboxReads is the number of reads of outbox rows (Store.Outbox).
	OutboxReads int64
}

type stats struct {
	commits, writes, outboxReads atomic.Int64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.stats.commits.Load(), Writes: s.stats.writes.Load(), OutboxReads: s.stats.outboxReads.Load()}
}
