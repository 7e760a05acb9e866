// Package scheduler is the edge agent's scheduler: it owns the assigned
// jobs and their leases, the two timing wheels that fire them, the run
// queue between TRIGGERED and final, and the steps of every attempt
// (triggered, running, finished, skipped, interrupted, fenced), each
// written to the agent's store in the transaction of its report.
//
// # Seam
//
// New takes a Config — the store, the clock, the handler registry, the
// logger and the settings it follows — and a Host, the four things of the
// agent it calls back: the clock offset the link measured, the encoding
// of a report for the outbox (agent id, salted Msg-Id, shard subject,
// EncodeReport), a kick to the outbox flusher, and a kick to the link for
// a heartbeat (a group lease to claim). The link reaches the scheduler
// through Apply (commands), HeartbeatReply, CheckSkew, View (what a
// heartbeat or a registration says: counters and lease claims) and
// ClaimedLeases; the agent through Recover, Run and Backlog.
//
// # Concurrency
//
// One goroutine (Run) owns all state: it waits in one select for ctx, its
// mailbox and a one-second tick, and handles each message by its type
// (Scheduler.handle) — a due wheel item, a write that became durable, a
// worker slot freed, a command applied, a heartbeat reply. Messages come
// from the wheels, the store writer's callbacks, the workers and the link;
// posting never blocks (the store writer must never wait for the
// scheduler, which waits for room in the store's queue), and heartbeat
// replies go before the messages waiting, so a lease renewal never waits
// behind a backlog of fires. The wheels are held back instead: at most
// MaxQueuedFires of their fires wait in the mailbox, further due items
// stay on the wheels and fire late, none is dropped. A command is applied
// on the caller's goroutine (one applier per kind: assign, unassign, run,
// cancel, lease_grant, lease_revoke) and reaches the scheduler once its
// write is durable. Workers (Config.Workers) run the handlers; the
// heartbeat View is published as an atomic snapshot.
//
// # Durability
//
// Nothing is acknowledged before it is in SQLite: a fire's TRIGGERED row
// and report are written before the attempt enters the run queue, its
// RUNNING row before a worker gets it, its final row before its slot is
// counted free; the command cursor moves in the command's transaction.
// While handlers are short, attempts beyond the workers are marked RUNNING
// ahead, enough to cover the write's round trip (at most eight workers'
// worth), so that a freed worker finds the next one durable (prefetch.go).
// A due run command of a one-shot job that finds a worker free (or, while
// handlers are short, room in the prefetch) is stored RUNNING in the
// command's own transaction and goes to a worker: one commit before its
// handler starts instead of two (directstart.go; the scheduler offers the
// room its pass left, the applier takes one).
// Recover rebuilds memory from the store at start: attempts found RUNNING
// are reported interrupted, PENDING runs go back on the wheels, fires
// found TRIGGERED but never started follow their job's misfire policy,
// and jobs are re-planned with it.
//
// # Costs
//
// A periodic fire is one wheel item of 16 bytes (no payload), one message
// and one row; the fires of one pass over the mailbox are written in one
// write function. The run queue holds at most Config.QueueSize attempts
// in memory, each with its row (the worker then reads nothing); beyond
// that they stay in SQLite and are reloaded, oldest first, when half the
// queue is free. With CoalesceSkipped a job's fires skipped by overlap
// cost a counter, written as one row and one report after
// Config.SkippedWindow; a real fire in between holds them in the job's
// row, in its own transaction, so that a crash does not lose them.
package scheduler
