package scheduler

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/axsched/ax/agent/store"
)

// Direct starts: a run command that is due (asap, a retry whose time has
// come) and arrives while a worker is free is stored RUNNING at once, with
// its running report, in the command's own transaction, and goes to that
// worker when the write is durable. Through the queue it took two commits
// before its handler started, each an fsync with synchronous=FULL: the
// command's (TRIGGERED, with its triggered report), then the scheduler's
// RUNNING write (start). Now it takes one, and an attempt takes two in
// all (the other: finished, with its report). While handlers are short,
// the prefetch's room counts as free (prefetch.go): such a run waits for
// the first worker that frees, as a prefetched attempt does. Without it,
// a dispatch load kept the workers' slots filled by the prefetch, and only
// 15–20 % of 10,000 dispatched runs started this way; with it, 79–84 %.
//
// The scheduler goroutine owns the workers, so it decides which slots a
// command may take: at the end of each pump, when nothing waits in the
// ready queue (nor in SQLite, nor a catch-up's slow start), it offers the
// room pump left (limit − busy − claimsOut, the limit being the workers
// and, while handlers are short, the prefetch) in slotOffer; the applier
// (the link's goroutine) takes one with a compare-and-swap
// (slotOffer.take). The next pump takes back what was not taken before it
// dispatches anything, so a queued attempt never waits for a slot a
// command holds unused. A slot taken is counted out (claimsOut), and pump
// leaves it to its run, until the run comes in (runStarted: busy, handed
// to its worker) or comes back (slotReturned: the command was a
// duplicate, or its write failed); a stop waits for them as it waits for
// batches being marked RUNNING.
//
// Only one-shot jobs' runs of no group lease take a slot: attempts of a
// one-shot job never overlap on an agent, so no concurrency limit is
// passed by going around the queue; a periodic job's run (a retry, a
// manual trigger) takes the queue, which applies its job's concurrency.
// Periodic fires keep their TRIGGERED write: a fire found TRIGGERED at a
// restart follows its job's misfire policy (run once, or skipped), which
// one found RUNNING, reported interrupted, would not.
//
// Meaning of RUNNING: unchanged, as for a prefetched attempt (prefetch.go):
// after a crash a RUNNING attempt is reported interrupted (its handler may
// have run), and one cancelled before its worker took it is not run
// (worker.runOne; a cancel's message comes after the run's, in the order
// of their writes).

// slotOffer is the worker slots offered to due runs (env.slots): the
// scheduler stores, the applier takes.
type slotOffer struct{ n atomic.Int64 }

// take takes one slot offered, if any.
func (o *slotOffer) take() bool {
	for {
		n := o.n.Load()
		if n <= 0 {
			return false
		}
		if o.n.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// reclaimSlots takes back the slots offered and not taken; those taken
// are counted out until their runs come in or back. A run may come in
// before the reclaim that counts its slot (claimsOut is then below zero
// in between); pump and the stop reclaim before they read claimsOut.
func (r *runQueue) reclaimSlots() {
	if r.offered == 0 {
		return
	}
	left := int(r.env.slots.n.Swap(0))
	r.claimsOut += r.offered - left
	r.offered = 0
}

// offerSlots offers to due runs the room pump had left (limit: the
// workers, and the prefetch while handlers are short) while nothing waits
// for it: not while the ready queue holds attempts, attempts wait in
// SQLite, or a catch-up starts slowly.
func (r *runQueue) offerSlots(limit int) {
	if r.stopped || r.slowStart || r.spilled || r.ready.len() > 0 {
		return
	}
	if n := limit - r.busy - r.claimsOut; n > 0 {
		r.offered = n
		r.env.slots.n.Store(int64(n))
	}
}

// runStarted hands a run stored RUNNING on a slot it took to a worker.
func (r *runQueue) runStarted(e store.Exec, spec *runSpec) {
	r.claimsOut--
	r.busy++
	j := r.jobs.job(e.JobID)
	if j.assigned == nil && e.Concurrency > 0 {
		j.limit = e.Concurrency
	}
	j.active++
	j.running++
	it := &item{id: e.ID, job: j, prio: uint8(e.Priority), runAt: e.ScheduledAt, row: &e, spec: spec, started: e.StartedAt}
	lag := startLag(e.StartedAt, e.ScheduledAt)
	ctx := r.track(it, lag)
	if r.env.cfg.Log.Enabled(context.Background(), slog.LevelDebug) {
		r.env.cfg.Log.Debug("started at once", "job_id", j.id, "exec_row", it.id, "lag", lag)
	}
	// Never blocks: the slot was free when offered (limit − busy −
	// claimsOut, the limit at most (1 + maxPrefetchFactor) × workers), so
	// units in flight ≤ busy ≤ the channel's capacity (started).
	r.work <- workUnit{it: it, ctx: ctx}
}

// slotReturned gives back a slot a command took and did not use.
func (r *runQueue) slotReturned() { r.claimsOut-- }
