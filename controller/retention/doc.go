// Package retention moves finished work out of live state into history
// for ax-controller (docs/architecture.md: A job's way, step 7), one per
// replica, for the executions of the shards it works.
//
// # What it owns
//
// A terminal execution leaves live state — its key in ax_execs — the live
// grace (Config.Grace: reports.dedup_window, default 10m, the Msg-Id
// de-duplication window of AX_RPT) after its last change; a one-shot job
// whose executions have all left it leaves the live job set (ax_jobs,
// every replica's job cache) in the same pass, and its idempotency key is
// released. Both stay in every replica's history index (package
// histindex) for history.retention (Config.HistoryRetention) after they
// left live state (an execution's rows go the grace + history.retention
// after its last change, on every replica alike, whichever swept it); the
// index serves them (the controller's GetExecution, ListExecutions,
// ListJobs with Retired) and the controller refuses the reports of an
// execution it holds that left live state (controller/ingest's lanes,
// through the controller's inHistory), so a late or replayed report never
// makes a new record of it.
//
// The removal is an explicit sweeper (Loop, every Config.Sweep: SweepAll,
// one pass or more: Sweep), run by the owner of each shard for the
// executions of its jobs, not KV per-message TTLs:
//   - a job leaves when all its executions have: a condition, not an age,
//     which no TTL expresses;
//   - a TTL would have to be put on every terminal write (the report
//     lanes' raw publishes, and kv.Update, which drops a per-key TTL) and
//     taken off again by an operator's retry of a FAILED execution; the
//     sweeper decides when it removes, with compare-and-set on the
//     revision it read, so a record changed meanwhile stays;
//   - the grace runs on the controller's clock (Env.Now), the one the
//     records' updated_at are written with, and tests step it;
//   - the buckets stay as they are: AllowMsgTTL cannot be turned off once
//     set and needs nats-server ≥ 2.11 on an external cluster.
//
// The sweeper finds its candidates in the history index (terminal, ended
// before the grace, of a shard this replica works: Env.Own), not by
// scanning the bucket. A pass takes them batch after batch for at most
// its budget (Config.Budget, 45 s), then turns to the jobs; a pass the
// budget cut with candidates left is followed by another at once
// (SweepAll), so that under a steady load the sweeper removes what leaves
// live state as fast as it comes, as far as the CPU it gets allows. Each removal is a purge marker published with the
// revision read (KV-Operation PURGE, rollup of the subject: the record
// goes), which itself leaves the stream one pass later (so that the
// replicas' watchers of ax_jobs have seen it): nothing is left, so
// ax_execs and ax_jobs hold only live work and a restart or a shard
// takeover reads only that. Where the buckets take per-message TTLs
// (nats-server 2.11 and later: streams.Buckets.MsgTTL) the marker carries
// one pass as its TTL (MarkerTTL) and the server removes it, a crash or
// not; a purge request per marker cost a quarter of a sweep's CPU
// (BenchmarkRetentionSweep, controller/BENCHMARKS.md). On an older server
// the next pass purges the subject up to the marker; a marker whose purge
// a crash cut off stays (one small message per key): in ax_execs for
// good, in ax_jobs until the next start finds it (below). A job an operator
// deleted leaves a delete marker, which a reload reads while the job has
// live executions (a deleted job's PENDING run is cancelled, not taken
// for an orphan): the replica that works the job's shard tells its
// sweeper of the delete (NoteDeleted), and so does every start for the
// markers its job load finds (an earlier version's deletes, a purge a
// crash cut off), deletedPerPass a pass; the pass after the one that
// finds every execution of the job ended and out of live state purges
// the marker (deletedJobMarker). A deleted job that never had an
// execution keeps it (a delete marker has no TTL). The deleted job's
// idempotency key is released with ReleaseIdem: a purge marker with the
// TTL, or without one a purge marker and, at once, a purge of the key's
// subject (nothing watches ax_idem). An execution is removed through the
// execution store (execstore.Store.Retire, after execution.Apply of
// execution.Expiry), the one writer of ax_execs; a job
// is recorded in history first (protocol.JobRetired on AX_EVT, Msg-Id
// retired/<job>/<generation>), then purged from ax_jobs and removed from
// the job cache (Env.Jobs), and its key in ax_idem purged if it still
// names the job. A pass also prunes the index's rows past the retention
// and the job cache's tombstones.
//
// # What it asks of its host
//
// Host is what it needs of the rest of the controller: a job read from
// ax_jobs (ReadJob, its absence matching ErrJobNotFound), and whether the
// history index holds every event AX_EVT stored so far (IndexUpToDate): a
// job is retired only then, so that an execution made a moment ago is in
// the index before "all its executions ended" is believed. Everything
// else it is given: at construction (New: Env, its Config, the logger,
// the clocks, the loop runner, the job cache, the shard ownership) and at
// start (Attach: the JetStream context, ax_idem, the execution store over
// ax_execs, the history index).
//
// # Concurrency
//
// Loop runs on one goroutine (the controller's, on its context) and makes
// one pass at a time; the state a pass hands to the next (Sweeper) is
// used by one pass at a time. Within a pass the KV requests run at most
// sweepParallel at a time on goroutines the pass starts and waits for, so
// the host's methods and the stores must be safe for concurrent use
// (ReadJob is called from them, IndexUpToDate from the pass itself).
// Attach is called once, at start, before Loop; Sweep may be called
// directly (tests) with a Sweeper of its own.
//
// # Errors
//
// A Host's ReadJob returns an error matching ErrJobNotFound for a job
// that does not exist; the retention then leaves the job alone. Match the
// sentinels (errors.go) with errors.Is.
package retention
