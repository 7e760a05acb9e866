// Package ingest takes the agents' reports in for ax-controller
// (docs/architecture.md), one per replica: it consumes AX_RPT per shard,
// authorizes each report, applies it to its execution through
// execution.Apply and the execution store, and looks after the stream.
//
// # What it owns
//
//   - The report consumers (shards.go): one durable pull consumer per
//     shard on AX_RPT (ConsumerName: ax-shard-<n>; with fewer shards
//     configured than protocol.DefaultShards, the shard subjects up to
//     DefaultShards get consumers too, read by the worker of n mod
//     shards), made by EnsureConsumers, which refuses another shard
//     count than the one they were made for (ErrShardCount; recorded in
//     AX_RPT's metadata, streams.ReportShardsKey). Their state is kept
//     in memory, not in the server's files (consumerConfig says why and
//     what a restart of the server costs); one stored in files by an
//     earlier version is made again.
//   - The shard workers (shards.go): StartShardWorker starts the worker
//     of a shard this replica acquired; the worker spreads the shard's
//     reports over its lanes by exec id and is stopped (drained or not)
//     through lease.ShardWorker by the shard ownership. Each of its
//     consumers is read by a consumerReader (consumerreader.go), which
//     makes the consumer again when it is gone under it (deleted, or lost
//     by a rebuilt NATS cluster) and reads on: the work queue delivers
//     what was not acknowledged (ax_report_consumers_remade_total). A
//     reader starting on a consumer with reports delivered and not
//     acknowledged (an earlier owner of the shard died with them) makes
//     it again first, so that they come again at once and in stream
//     order, ahead of the reports sent after them
//     (ax_report_consumers_reset_total).
//   - The lanes (lanes.go, laneevents.go, lanelinger.go): a lane applies its reports in
//     batches: decode, authorize, plan (execution.Apply per report, the
//     reports of one execution folded into one record), the writes of a
//     batch issued together (execstore.Store.PutAsync, compare-and-set),
//     a lost compare-and-set redone for that execution alone, then the
//     effects (Host.StartEffects) and the acknowledgements once the write
//     and its events are stored (the events of one execution's reports
//     one report after another, each once the one before is stored, and a
//     refused event published again before the lane goes on, so that
//     AX_EVT keeps the order of each execution's reports), one behind: the ack keeper (ackkeep.go)
//     holds the acknowledgement of the report applied last until the
//     next is applied, for at most 250 ms, or until a shard worker stops,
//     so that AX_RPT's last block is not emptied, and replaced by a new
//     file, after every report. A lane caches the records it read or
//     wrote; the triggered and running reports of a one-shot job's
//     execution wait up to reportLinger for its later reports.
//   - Report authorization (reportauth.go): the subject's agent and shard
//     token, the holder of a lease epoch (ShardOK, AuthorizeEpoch), and
//     who may create an execution's record (AuthorizeCreate). A refused
//     report is counted in ax_reports_rejected_total under a Reject*
//     reason (reasons.go) and logged.
//   - Stray assignments (stray.go): a refused fire that proves its agent
//     holds a job it must not (deleted, pinned to another agent, one-shot)
//     also sends the agent an unassign of it, within per-agent limits.
//   - The records the controller has just created (createdcache.go):
//     NoteCreated keeps them for the lane of the execution's first
//     report, which takes them instead of reading ax_execs. A record
//     noted at revision 0 is one a create holds unstored
//     (controller/createheld.go): the lane's write is its create.
//   - The report stream's upkeep (reportstream.go): ReportStreamLoop
//     exports AX_RPT's fill and bounds as gauges and, on the replica that
//     works shard 0, purges reports on shard tokens no consumer reads
//     (stored by a stream an earlier version made; AX_RPT takes the read
//     tokens only now, streams.Config.ReportShards) and those left stored
//     at or below their consumer's ack floor.
//
// # What it asks of its host
//
// Host is what it needs of the rest of the controller: a job read from
// ax_jobs when the cache does not have it (ReadJob, its absence matching
// ErrJobNotFound), the execution.Env of a change to an execution of a job
// (JobEnv: retry policy, jitter, the time; it reads a job the cache has
// not seen, and its error holds the reports back), whether an execution without
// a live record left live state for the history (InHistory), and the
// effects of an applied report: events and retry timers (StartEffects).
// Everything else it is given: at construction (New: Env, its Config,
// Metrics, logger, clocks, loop runner, the job cache, the group leases
// for epoch holders and group membership, the shard ownership) and at
// start (Attach: the controller's context, NATS connection and the
// execution store over ax_execs).
//
// # Concurrency
//
// A shard worker runs one reader goroutine per consumer it reads and one
// goroutine per lane (shardLanes), all on the context given to Attach
// (cancelled by the controller's Close) and ended by Stop. A lane alone
// owns its batch state and record cache; the reports of one execution
// always go to one lane and are applied there in stream order. The lanes
// call Host.JobEnv and Host.InHistory once per execution of a batch,
// Host.StartEffects once per report and Host.ReadJob only for a report
// whose job the cache does not have; the host's methods must be safe for
// concurrent use (lanes of all shards call them at once). NoteCreated is
// safe for concurrent use, and so is the ack keeper the lanes of every
// shard share (a mutex; its hold timer acknowledges from a timer
// goroutine). ReportStreamLoop runs on one goroutine (the
// controller's); EnsureConsumers and Attach are called once, at start,
// before the ownership starts a worker.
//
// # Errors
//
// EnsureConsumers returns an error matching ErrShardCount when the shard
// count changed; the controller reports it as a config error of key
// shards. Match the sentinels (errors.go) with errors.Is.
package ingest
