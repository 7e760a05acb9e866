package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// reopenWait is how long a consumer reader waits after its first failed
// attempt to make its consumer again (the server unreachable, AX_RPT
// itself deleted); the wait doubles with each failure up to
// reopenWaitMax.
const (
	reopenWait    = time.Second
	reopenWaitMax = 30 * time.Second
)

// pullMax is how many reports a consumer reader keeps pulled ahead.
const pullMax = 512

// pullExpiry and pullHeartbeat are the life of a reader's pull request and
// the server's idle heartbeat on it. Two heartbeats missed make the reader
// look for its consumer (readUntilGone), which a restart of the NATS
// server loses (its state is in memory, see consumerConfig): with the
// library's defaults (30 s, 15 s) a shard's reports waited about 30 s for
// it to be made again; with these, a few seconds. They cost 16 idle
// heartbeats every 2 s per replica.
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = 2 * time.Second
)

// consumerConfig is the config of report consumer n on AX_RPT
// (EnsureConsumers, and a reader making its consumer again).
//
// Its state (delivered and acknowledged sequences) is kept in memory, not
// in the server's files: AX_RPT is a work queue, so an acknowledged report
// leaves the stream and the reports a new consumer delivers are the ones
// left. A file consumer's state is rewritten (a temporary file and a
// rename) up to ten times a second per consumer while reports flow; in
// memory, the controller's CPU per dispatched task fell about 9 % (0.648
// → 0.590 ms, medians of seven alternated pairs; stop 47,
// bench/JOURNAL.md). What a restart of the server costs: the consumers are
// made again (EnsureConsumers, or a reader finding its consumer gone), and
// after a kill -9 of the server they deliver again the reports whose
// removal it lost (a file consumer skipped those below its last stored ack
// floor); a lane applies a report delivered twice once (the record's
// applied steps), and acknowledging it again removes it.
func (c *Ingest) consumerConfig(n int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName(n),
		Description:   "ax controller: reports of shard " + strconv.Itoa(n),
		FilterSubject: protocol.ReportShardSubject(n),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4096,
		MemoryStorage: true,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      c.cfg.Replicas,
		Metadata:      map[string]string{streams.ReportShardsKey: strconv.Itoa(c.cfg.Shards)},
	}
}

// consumerReader reads one report consumer (ax-shard-<k>) for a shard
// worker and hands each report to the lane of its execution. When the
// consumer is gone under it (deleted by an operator, or lost by a NATS
// cluster that was rebuilt), the reader makes it again with the same
// config and reads on: AX_RPT is a work queue, so the new consumer
// delivers every report not yet acknowledged, and a report applied but
// not acknowledged before the loss comes again and is applied once (the
// record's applied steps). Without it the worker's iterator ended and the
// shard's reports waited for the next restart.
//
// Its goroutine (run) is the only one that replaces the iterator; the
// mutex guards the iterator against the worker's Stop, which may come at
// any time.
type consumerReader struct {
	w *shardWorker
	k int

	mu      sync.Mutex
	it      jetstream.MessagesContext // the current iterator
	stopped bool                      // Stop called: no new iterator
}

// open makes the reader's first iterator (StartShardWorker: an error
// there fails the start of the worker), after resetting the consumer when
// a reader before it left reports in flight (reset).
func (r *consumerReader) open(ctx context.Context) error {
	cons, err := r.reset(ctx)
	if err == nil && cons == nil {
		cons, err = r.make(ctx)
	}
	if err != nil {
		return err
	}
	it, err := r.messages(cons)
	if err != nil {
		return err
	}
	r.it = it
	return nil
}

// reset deletes consumer k when it has reports delivered and not
// acknowledged, to be made again; it returns the consumer when it kept
// it, nil when it deleted it or there was none.
//
// A worker starts when this replica acquires the shard, so whoever pulled
// those reports no longer works it: a replica that died or froze holding
// the shard's lease, this process before a kill -9, a hand-over past its
// drain. That reader may have written a report's record and died before
// its event was stored and the report acknowledged. Left to the ack wait
// (AckWait, 30 s by default) such a report came back behind the reports
// its agent published after it, which the new owner had applied by then:
// the record moved on from a state whose event AX_EVT lacked, and the
// event, published again when the report came back as a duplicate, was
// stored after the later ones (TestUnackedReportsBeforeLaterOnes). A new
// consumer delivers every report left in the work queue in stream order,
// at once: each report applies, or replays its events, in the order its
// agent sent it. A report the old reader still acknowledges (a drain
// ending as the new owner starts) is delivered once more and applied once
// (the record's applied steps).
func (r *consumerReader) reset(ctx context.Context) (jetstream.Consumer, error) {
	c := r.w.c
	cons, err := c.js.Consumer(ctx, protocol.StreamReports, ConsumerName(r.k))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report consumer %d: %w", r.k, err)
	}
	pending := cons.CachedInfo().NumAckPending
	if pending == 0 {
		return cons, nil
	}
	if err := c.js.DeleteConsumer(ctx, protocol.StreamReports, ConsumerName(r.k)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("report consumer %d: reset: %w", r.k, err)
	}
	c.m.ConsumersReset.Inc()
	c.log.Info("report consumer reset: the reports an earlier reader left unacknowledged come again now, in order",
		"shard", r.w.n, "consumer", ConsumerName(r.k), "unacknowledged", pending)
	return nil, nil
}

// remake makes consumer k again (or updates it) and returns an iterator
// over it.
func (r *consumerReader) remake(ctx context.Context) (jetstream.MessagesContext, error) {
	cons, err := r.make(ctx)
	if err != nil {
		return nil, err
	}
	return r.messages(cons)
}

// make makes consumer k, or updates it to its config.
func (r *consumerReader) make(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := r.w.c.js.CreateOrUpdateConsumer(ctx, protocol.StreamReports, r.w.c.consumerConfig(r.k))
	if err != nil {
		return nil, fmt.Errorf("report consumer %d: %w", r.k, err)
	}
	return cons, nil
}

// messages returns the reader's iterator over cons.
func (r *consumerReader) messages(cons jetstream.Consumer) (jetstream.MessagesContext, error) {
	it, err := cons.Messages(jetstream.PullMaxMessages(pullMax), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return nil, fmt.Errorf("report consumer %d: %w", r.k, err)
	}
	return it, nil
}

// stop ends the current iterator: drained (the reports already pulled
// still come out of Next) or at once. No iterator follows it.
func (r *consumerReader) stop(drain bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if drain {
		r.it.Drain()
	} else {
		r.it.Stop()
	}
}

// current returns the iterator to read, nil once stopped.
func (r *consumerReader) current() jetstream.MessagesContext {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	return r.it
}

// replace installs it as the current iterator; false (it stopped) when
// the reader was stopped meanwhile.
func (r *consumerReader) replace(it jetstream.MessagesContext) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		it.Stop()
		return false
	}
	r.it = it
	return true
}

// run reads until the reader is stopped (and its iterator drained) or ctx
// ends, making the consumer again whenever it is gone.
func (r *consumerReader) run(ctx context.Context) {
	it := r.current()
	for it != nil {
		gone := r.readUntilGone(ctx, it)
		if !gone {
			return
		}
		it = r.reopen(ctx)
	}
}

// readUntilGone hands the reports of it to the lanes. It returns true when the
// consumer is gone and the reader must make it again, false when the
// reader is done (stopped, drained, ctx ended).
func (r *consumerReader) readUntilGone(ctx context.Context, it jetstream.MessagesContext) bool {
	c := r.w.c
	for {
		msg, err := it.Next()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return false
		case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
			it.Stop()
			c.log.Warn("report consumer deleted; making it again", "shard", r.w.n, "consumer", ConsumerName(r.k))
			return true
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			// Stopped by the worker, or ended by the library on an error
			// it could not pass on (the consumer's end among them).
			return r.current() != nil
		case errors.Is(err, jetstream.ErrNoHeartbeat):
			// The server stopped answering this consumer's pulls: a
			// consumer lost without a deletion notice looks so.
			if _, err := c.js.Consumer(ctx, protocol.StreamReports, ConsumerName(r.k)); errors.Is(err, jetstream.ErrConsumerNotFound) {
				it.Stop()
				c.log.Warn("report consumer missing; making it again", "shard", r.w.n, "consumer", ConsumerName(r.k))
				return true
			}
			continue
		default:
			c.log.Warn("report consumer", "shard", r.w.n, "consumer", ConsumerName(r.k), "err", err)
			continue
		}
		l := r.w.lanes[laneOf(msg.Data(), len(r.w.lanes))]
		select {
		case l.in <- msg:
		case <-ctx.Done():
			return false
		}
	}
}

// reopen makes consumer k again and returns an iterator over it, trying
// until it succeeds (waits from reopenWait to reopenWaitMax); nil when
// the reader was stopped or ctx ended first.
func (r *consumerReader) reopen(ctx context.Context) jetstream.MessagesContext {
	c := r.w.c
	wait := reopenWait
	for {
		it, err := r.remake(ctx)
		if err == nil {
			if !r.replace(it) {
				return nil
			}
			c.m.ConsumersRemade.Inc()
			return it
		}
		if r.current() == nil || ctx.Err() != nil {
			return nil
		}
		c.log.Warn("report consumer not made again; retrying", "shard", r.w.n, "consumer", ConsumerName(r.k), "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		wait = min(2*wait, reopenWaitMax)
	}
}
