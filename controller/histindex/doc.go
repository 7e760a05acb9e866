// Package histindex is the execution history index of an ax controller
// replica: one SQLite file (modernc.org/sqlite, pure Go) that holds the
// latest snapshot of every execution, live or ended, and the one-shot jobs
// retired from the live job set, together with the AX_EVT sequence it
// applied last. It owns the schema, the writes and the reads; it knows
// nothing of NATS. The controller's history follower decodes AX_EVT and
// hands batches of Items to Apply, with the sequence of their last
// message; the API's lists read List and Get; retention asks EndedBefore,
// MarkGone, JobsDone and Prune; the reload of a shard compares its live
// records with Stamps (every live row of its shards) or StampsOf (the
// rows of the records it checks, by exec id: after a crash, often a few
// among many), and asks Attention for the executions it must read whole
// when the index stands in for its scan of ax_execs (those a timer, a
// placement or an agent may move; not the delayed runs PENDING on their
// agents, which a partial index by scheduled time leaves out).
//
// # Shape
//
//   - One writer connection (the follower) and up to four readers (the
//     API), WAL mode: readers never wait for the writer. An empty path
//     keeps the index in memory, on one connection.
//   - Memory: the writer's page cache is 32 MiB, a reader's 8 MiB, and
//     modernc's allocator gives each 4 KiB page a slot of 8 KiB, so a
//     full writer cache holds about 60 MB. ReleaseMemory frees it (the
//     follower calls it at the end of a minute in which it applied fewer
//     than 1,000 rows: after a burst, also when a trickle of events
//     follows it, not under steady traffic), and a reader connection
//     unused for a minute closes.
//   - Apply writes a batch and the cursor in one transaction, so a restart
//     resumes exactly where the last commit ended. A snapshot replaces a
//     row only when it Supersedes it (newer updated_at, or the same one
//     and at least as far along, Progress), so events replayed or read
//     out of order change nothing; LatestOnly spares the writes of the
//     older snapshots of one batch.
//   - Holdback keeps the snapshots of live executions out of a batch
//     until the snapshot that supersedes them comes (then only that one
//     is written) or they are old enough; the cursor the follower stores
//     stays before the oldest one held. A snapshot whose next step is not
//     due soon (Quiet: a delayed PENDING, a RETRY_WAITING) is not held.
//   - Rows are keyed in insertion order, not by exec id: a batch appends
//     to the two largest b-trees. An exec id starts with its job's id, so
//     the exec id index also finds a job's executions.
//   - An index of another schema Version is emptied when opened (Rebuilt),
//     and the follower rebuilds it from the stream: it holds nothing
//     AX_EVT does not.
//
// # Costs
//
// A list page reads its rows from an index (exec id, agent, state, or
// scheduled time for a narrow range): one million executions list in
// 0.7–1.3 ms a page (controller/BENCHMARKS.md). Applying 1,000-row batches
// of new executions writes about 18 KB per row (three random b-trees: exec
// id, agent, state; BenchmarkHistoryIndexApply, 200,000 rows).
package histindex
