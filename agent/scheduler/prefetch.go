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
// pump dispatches up to workers more attempts than there are workers: their
// RUNNING writes go out while the workers still run the attempts before,
// and each is handed to the first worker that frees. Such an attempt is
// RUNNING in the store a little before its handler starts — about one
// short handler's time more than the write's own round trip, which
// RUNNING already spanned. Its meaning is unchanged: after a crash, a
// RUNNING attempt is reported interrupted (its handler may have run), and
// one cancelled or stopped before a worker took it is not run at all
// (worker.runOne). Long handlers get no prefetch: an attempt would then
// wait a long handler's time as RUNNING.

// prefetchBelow is the moving average of handler run times under which
// pump prefetches.
const prefetchBelow = 20 * time.Millisecond

// noteHandler adds a handler's run time to the moving average (weight 1/8).
func (r *runQueue) noteHandler(d time.Duration) {
	if r.handlerAvg == 0 {
		r.handlerAvg = max(d, 1)
		return
	}
	r.handlerAvg += (d - r.handlerAvg) / 8
}

// prefetch is how many attempts pump may dispatch beyond the workers: as
// many as there are workers while handlers are short, none during a
// catch-up's slow start or before a handler has run.
func (r *runQueue) prefetch() int {
	if r.slowStart || r.handlerAvg == 0 || r.handlerAvg >= prefetchBelow {
		return 0
	}
	return r.workers
}
