package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
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

func shardConsumerName(n int) string { return "ax-shard-" + strconv.Itoa(n) }

// startShards creates (or updates) the per-shard durable consumers and
// starts one worker per shard. A later issue spreads shards over replicas;
// here this controller owns them all.
//
// An agent that has never registered reports on protocol.DefaultShards
// shards (it learns the configured count from its registration reply).
// With fewer shards configured, the subjects of shards Shards..DefaultShards-1
// get consumers (and workers) too, so those early reports are applied
// rather than left in the work queue; they carry the full execution key,
// so which worker applies them does not matter for correctness (every
// write is compare-and-set on the revision). With more shards configured,
// the early reports land on shards below DefaultShards, which exist.
func (c *Controller) startShards(ctx context.Context) error {
	if cons, err := c.js.Consumer(ctx, protocol.StreamReports, shardConsumerName(0)); err == nil {
		if got := cons.CachedInfo().Config.Metadata[shardMetaKey]; got != "" && got != strconv.Itoa(c.cfg.Shards) {
			return configErr("shards", "the report consumers were made for %s shards, config says %d (the shard count is fixed once streams exist)", got, c.cfg.Shards)
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("report consumers: %w", err)
	}
	for n := range max(c.cfg.Shards, protocol.DefaultShards) {
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
			l := newLane(w)
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
