// Package agent is the ax edge agent: it registers with the controller,
// triggers its assigned jobs from its own timing wheels, executes them and
// reports every step — and keeps doing so while the link to the controller
// is down (docs/architecture.md: Failure handling).
//
// Everything the agent knows lives in one SQLite file (agent/store): jobs,
// executions, the command cursor and an outbox of reports. Each local step
// (triggered, running, finished, skipped, interrupted) is written in the
// same transaction as its report, and reports are published from the
// outbox in order and deleted only on PubAck, so no fire and no result is
// lost across kill -9, restarts or partitions. The flusher publishes the
// rows of this run from memory, handed over by the store once they are
// durable (no read-back); an earlier run's rows, and rows beyond the
// memory bound during a long partition, are read from SQLite. The wheel's
// due fires of one scheduler pass are written in one write function; with
// outbox.coalesce_skipped a job's fires skipped by overlap are written as
// one SKIPPED row and report with their count after
// outbox.skipped_window (a real fire in between holds them in the job's
// row).
//
// Goroutines and what each owns:
//
//   - the store writer: the write connection (group commit);
//   - the scheduler (agent/scheduler): jobs, leases, the ready queue,
//     per-job counts, the worker slots, the skew state;
//   - two wheel drivers (10 ms normal, 1 ms fine): pending deadlines;
//   - the workers: one attempt each at a time;
//   - the flusher: the outbox cursor and outstanding publishes;
//   - the link: the NATS connection, registration, heartbeats, commands.
//
// Group jobs (target group, mode any) fire only while the agent holds the
// job's lease: an epoch from the assignment, valid from a heartbeat reply
// that renews it, for the TTL it names counted from when that heartbeat
// was sent, on the monotonic clock. Every heartbeat claims the agent's
// group jobs; a lapsed lease stops the job at its next fire, and a run
// sent under an epoch (a retry) waits for that lease or is dropped once
// the job moved on. A clean stop hands the leases back in a last
// heartbeat (Stopping) after the scheduler stopped.
//
// An embedding program registers Go handlers with WithHandler; exec and http
// are built in (see agent/handler), registered in the same registry from
// Config, and run only what Config allows.
package agent
