package scheduler

import "time"

// The prefetch: an attempt is handed to a worker only once its RUNNING
// write is durable (so that an attempt whose handler may have run is never
// left TRIGGERED by a crash, and run again as if it had not). That write
// is one commit of the store's single writer, a round trip of a few
// milliseconds on a busy machine (2.8–3.2 ms measured under 2,000 runs a
// second on 2 cores), and a worker whose slot waits for it sits idle: with
// handlers of about 1 ms, 8 workers spent three quarters of their time
// waiting and ran at most about 2,000 attempts a second.
//
// So while handlers are short (their moving average under prefetchBelow),
// pump dispatches more attempts than there are workers: their RUNNING
// writes go out while the workers still run the attempts before, and each
// is handed to the first worker that frees. How many more follows from
// Little's law: to keep workers busy, each finishing an attempt every
// handlerAvg, the attempts in the write's round trip (writeAvg, measured
// from pump to the write's durable callback) must number workers ×
// writeAvg / handlerAvg. So the prefetch is workers × k, k that ratio
// rounded up, at least 1 and at most maxPrefetchFactor. With one worker's
// worth only (k = 1, before 2026-12-04), 2,000 periodic fires a second,
// each an HTTP GET of about 1 ms, on 2 cores with RUNNING writes taking
// about 3 ms, left the 8 workers waiting: the run queue fell behind and
// 4,000–6,000 fires in 45 s were skipped by overlap (bench/vsasynq,
// periodic).
//
// Such an attempt is RUNNING in the store a little before its handler
// starts: about the write's own round trip more, which RUNNING already
// spanned. Its meaning is unchanged: after a crash, a RUNNING attempt is
// reported interrupted (its handler may have run), and one cancelled or
// stopped before a worker took it is not run at all (worker.runOne). Long
// handlers get no prefetch: an attempt would then wait a long handler's
// time as RUNNING.

// prefetchBelow is the moving average of handler run times under which
// pump prefetches.
const prefetchBelow = 20 * time.Millisecond

// maxPrefetchFactor bounds k, the prefetch in workers: at most that many
// workers' worth of attempts are RUNNING ahead of the workers (what a
// crash then reports interrupted without their handlers having run). With
// 4, a loaded machine still skipped fires under the periodic workload
// (4,723 in one of two runs); with 8, none in five (bench/JOURNAL.md, stop 39).
const maxPrefetchFactor = 8

// noteHandler adds a handler's run time to the moving average (weight 1/8).
func (r *runQueue) noteHandler(d time.Duration) {
	if r.handlerAvg == 0 {
		r.handlerAvg = max(d, 1)
		return
	}
	r.handlerAvg += (d - r.handlerAvg) / 8
}

// noteStartWrite adds a RUNNING write's round trip, from pump to its
// durable callback, to the moving average (weight 1/8).
func (r *runQueue) noteStartWrite(d time.Duration) {
	d = max(d, 0)
	if r.writeAvg == 0 {
		r.writeAvg = d
		return
	}
	r.writeAvg += (d - r.writeAvg) / 8
}

// prefetch is how many attempts pump may dispatch beyond the workers:
// workers × k while handlers are short (k = writeAvg / handlerAvg rounded
// up, within 1..maxPrefetchFactor), none during a catch-up's slow start
// or before a handler has run.
func (r *runQueue) prefetch() int {
	if r.slowStart || r.handlerAvg == 0 || r.handlerAvg >= prefetchBelow {
		return 0
	}
	k := 1
	if r.writeAvg > r.handlerAvg {
		k = int((r.writeAvg + r.handlerAvg - 1) / r.handlerAvg)
	}
	return r.workers * min(k, maxPrefetchFactor)
}
