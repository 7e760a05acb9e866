// Package store is the edge agent's durable state: one SQLite file
// (modernc.org/sqlite, no cgo) in WAL mode holding the assigned jobs (and,
// of the jobs taken away, the generation they were taken at: an older
// assign after it is refused), the executions, the report outbox and a few
// meta values (agent id, command cursor, clock offset, shard count).
//
// Writes are group-committed. One writer goroutine owns the write
// connection; callers submit write functions (Do waits, Submit calls back)
// and the writer runs everything queued — up to Options.MaxBatch functions —
// in one transaction, each function inside its own SAVEPOINT so that one
// failing function rolls back only its own changes. After COMMIT returns
// (and, with synchronous=FULL, after the WAL is fsynced) every caller of the
// batch is answered. So throughput is bound by one fsync per batch, not per
// row, and nothing is acknowledged before it is durable. While writes keep
// coming, the writer lingers before a batch (a quarter of the last batch's
// time, at most Options.Linger, 1 ms by default, both read on
// Options.Clock) so that a burst shares one commit; a write after a quiet
// spell is committed at once.
//
// Outbox rows are written when their batch commits, in multi-row inserts
// with seqs the writer assigns, and handed, after the commit, to the sink
// set with SetOutboxSink (the agent's flusher publishes them from memory).
// Rows the controller acknowledged are deleted by the next commit of any
// write (AckLater), not by a commit of their own: at a few attempts a
// second that saves one commit, one fsync, of the four an attempt took;
// after Options.AckDelay (a minute) without another write, or at Close,
// the delete commits alone. Stats counts commits, write functions,
// statements and rows read back.
//
// Durability: the default is synchronous=FULL. In WAL mode NORMAL survives a
// process crash (kill -9) but may lose the last commits on a power cut,
// which small edge devices see often; since group commit pays one fsync per
// batch, FULL costs little throughput (see agent/BENCHMARKS.md). NORMAL can
// be chosen in the config.
//
// Errors that mean the file cannot be trusted or written — read-only file
// or directory, corrupt file, full disk, I/O error — wrap the sentinels
// ErrReadOnly, ErrCorrupt, ErrDiskFull and ErrIO. Open refuses such a file;
// a write that hits one fails the store for good (Err, Failed), so that the
// agent stops instead of losing data silently.
package store
