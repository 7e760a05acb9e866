package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// shardMetaKey is the consumer metadata key recording the shard count the
// report consumers were made for.
const shardMetaKey = "ax_shards"

// shardCacheMax bounds the records a shard worker keeps between reports.
const shardCacheMax = 8192

// shardLanes is the number of lanes of a shard worker: reports of
// different executions are applied concurrently, those of one execution
// always in one lane, in stream order.
const shardLanes = 4

// shardWorker consumes the reports of one shard from its durable pull
// consumer (ax-shard-<n>) and applies them to the executions in KV. The
// reports of one execution go to one lane (hash of the exec id) and are
// applied there one at a time, in stream order.
type shardWorker struct {
	c     *Controller
	n     int
	it    jetstream.MessagesContext
	lanes []*lane
}

// lane applies the reports given to it in order; it alone owns its cache.
type lane struct {
	w     *shardWorker
	in    chan jetstream.Msg
	cache map[string]execVersion // exec id → last record this lane read or wrote
}

func shardConsumerName(n int) string { return "ax-shard-" + strconv.Itoa(n) }

// startShards creates (or updates) the per-shard durable consumers and
// starts one worker per shard. A later issue spreads shards over replicas;
// here this controller owns them all.
func (c *Controller) startShards(ctx context.Context) error {
	if cons, err := c.js.Consumer(ctx, protocol.StreamReports, shardConsumerName(0)); err == nil {
		if got := cons.CachedInfo().Config.Metadata[shardMetaKey]; got != "" && got != strconv.Itoa(c.cfg.Shards) {
			return configErr("shards", "the report consumers were made for %s shards, config says %d (the shard count is fixed once streams exist)", got, c.cfg.Shards)
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("report consumers: %w", err)
	}
	for n := range c.cfg.Shards {
		cons, err := c.js.CreateOrUpdateConsumer(ctx, protocol.StreamReports, jetstream.ConsumerConfig{
			Durable:       shardConsumerName(n),
			Description:   "ax controller: reports of shard " + strconv.Itoa(n),
			FilterSubject: protocol.ReportShardSubject(n),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       c.cfg.ackWait,
			MaxDeliver:    -1,
			MaxAckPending: 4096,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			Replicas:      c.cfg.NATS.Replicas,
			Metadata:      map[string]string{shardMetaKey: strconv.Itoa(c.cfg.Shards)},
		})
		if err != nil {
			return fmt.Errorf("report consumer of shard %d: %w", n, err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(512))
		if err != nil {
			return fmt.Errorf("report consumer of shard %d: %w", n, err)
		}
		w := &shardWorker{c: c, n: n, it: it}
		for range shardLanes {
			l := &lane{w: w, in: make(chan jetstream.Msg, 64), cache: map[string]execVersion{}}
			w.lanes = append(w.lanes, l)
			c.goRun(l.run)
		}
		c.shards = append(c.shards, w)
		c.goRun(w.run)
	}
	return nil
}

func (w *shardWorker) stop() { w.it.Stop() }

// run reads the shard's messages and hands each to the lane of its
// execution (the exec id is read from the subject-independent report body).
func (w *shardWorker) run(ctx context.Context) {
	defer func() {
		for _, l := range w.lanes {
			close(l.in)
		}
	}()
	for {
		msg, err := w.it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return
			}
			w.c.log.Warn("report consumer", "shard", w.n, "err", err)
			continue
		}
		l := w.lanes[laneOf(msg.Data(), len(w.lanes))]
		select {
		case l.in <- msg:
		case <-ctx.Done():
			return
		}
	}
}

// laneOf hashes the exec_id of a report body to a lane. Encoders write
// "exec_id":"..." without spaces; a body where it is not found that way
// goes to lane 0, where it is decoded strictly (and rejected if bad).
func laneOf(data []byte, n int) int {
	key := []byte(`"exec_id":"`)
	i := bytes.Index(data, key)
	if i < 0 {
		return 0
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write(rest[:j])
	return int(h.Sum32() % uint32(n))
}

func (l *lane) run(ctx context.Context) {
	for msg := range l.in {
		if ctx.Err() != nil {
			continue // drain: unacknowledged messages are redelivered
		}
		l.handle(ctx, msg)
	}
}

// handle applies one report message and acknowledges it only after the
// KV write (or after deciding that it is not to be applied). A transient
// failure (KV unreachable) is retried in place, keeping the message in
// progress, so that the reports behind it are never applied out of order.
func (l *lane) handle(ctx context.Context, msg jetstream.Msg) {
	c := l.w.c
	r, err := protocol.DecodeReport(msg.Data())
	if err != nil {
		c.m.reject(rejectInvalid)
		c.log.Warn("report rejected", "reason", rejectInvalid, "subject", msg.Subject(), "err", err)
		_ = msg.Ack()
		return
	}
	backoff := 50 * time.Millisecond
	for {
		err := l.apply(ctx, r, l.mayDefer(msg))
		if err == nil {
			_ = msg.Ack()
			return
		}
		if errors.Is(err, errDefer) {
			delay := deferDelay(msg)
			c.m.deferred.Inc()
			c.log.Info("report ahead of its execution, deferred", "exec", r.ExecID, "attempt", r.Attempt, "kind", r.Kind, "in", delay)
			_ = msg.NakWithDelay(delay)
			return
		}
		delete(l.cache, r.ExecID)
		if ctx.Err() != nil {
			return // shutting down: the server redelivers it to the next owner
		}
		c.log.Warn("report not applied yet, retrying", "exec", r.ExecID, "attempt", r.Attempt, "kind", r.Kind, "err", err, "in", backoff)
		_ = msg.InProgress()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errDefer: the report is ahead of its execution's record; redeliver later.
var errDefer = errors.New("report ahead of its execution")

// mayDefer reports whether a report that is ahead of its record may still
// wait for the missing earlier reports: while it is younger than three ack
// waits (a crashed controller's unacknowledged reports come back after one)
// and at least a minute.
func (l *lane) mayDefer(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil {
		return false
	}
	return time.Since(md.Timestamp) < max(3*l.w.c.cfg.ackWait, time.Minute)
}

// deferDelay grows with the number of deliveries: 250ms, 500ms, ... 8s.
func deferDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = max(md.NumDelivered, 1)
	}
	return min(250*time.Millisecond<<min(n-1, 5), 8*time.Second)
}

// apply applies one report: nil when it was applied or rejected for good,
// errDefer when it is ahead of its record and may wait, another error when
// it should be tried again.
func (l *lane) apply(ctx context.Context, r protocol.Report, mayDefer bool) error {
	c := l.w.c
	policy := func() retry.Policy {
		if j, _, ok := c.jobs.get(r.JobID); ok {
			return j.Retry.Policy().WithDefaults()
		}
		return retry.DefaultPolicy()
	}
	// The first report of a periodic fire usually creates the record: try
	// the create without reading first; a conflict falls back to reading.
	guessAbsent := false
	if r.Kind == protocol.ReportTriggered && r.Attempt == 1 {
		if j, _, ok := c.jobs.get(r.JobID); ok && isPeriodic(j) {
			guessAbsent = true
		}
	}
	for i := range 20 {
		cur, ok := l.cache[r.ExecID]
		if !ok && !(guessAbsent && i == 0) {
			var err error
			if cur, err = c.readExec(ctx, r.ExecID); err != nil {
				return err
			}
		}
		res := applyReport(cur.rec, r, policy, rand.Int64N, c.now())
		if res.reject != "" && res.early && mayDefer {
			l.remember(r.ExecID, cur)
			return errDefer
		}
		if res.reject != "" {
			l.remember(r.ExecID, cur)
			c.m.reject(res.reject)
			c.log.Info("report rejected", "reason", res.reject, "detail", res.detail, "exec", r.ExecID,
				"attempt", r.Attempt, "kind", r.Kind, "agent", r.Agent)
			return nil
		}
		rev, err := c.writeExec(ctx, cur, res.next)
		if errors.Is(err, errCASConflict) {
			delete(l.cache, r.ExecID)
			continue
		}
		if err != nil {
			return err
		}
		l.remember(r.ExecID, execVersion{rec: res.next, rev: rev})
		c.m.apply()
		c.afterTransition(res.next, res.tr)
		return nil
	}
	return fmt.Errorf("%w: too much contention", ErrConflict)
}

// remember caches a record for the next report of the same execution;
// terminal records are dropped (later reports for them are rare).
func (l *lane) remember(id string, v execVersion) {
	if v.rec == nil || v.rec.State.Terminal() {
		delete(l.cache, id)
		return
	}
	if len(l.cache) >= shardCacheMax {
		clear(l.cache)
	}
	l.cache[id] = v
}
