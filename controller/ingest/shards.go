package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// shardCacheMax bounds the records a shard worker keeps between reports.
const shardCacheMax = 8192

// shardLanes is the number of lanes of a shard worker: reports of
// different executions are applied concurrently, those of one execution
// always in one lane, in stream order.
const shardLanes = 4

// shardWorker consumes the reports of one shard from its durable pull
// consumers (ax-shard-<n>, and the extra ones it covers, see
// EnsureConsumers) and applies them to the executions in KV. The reports
// of one execution go to one lane (hash of the exec id) and are applied
// there one at a time, in stream order. A worker runs while this replica
// holds the shard's lease (lease.Ownership starts it through its host and
// stops it).
type shardWorker struct {
	c       *Ingest
	n       int
	readers []*consumerReader
	lanes   []*lane
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// ConsumerName is the name of report consumer n on AX_RPT (ax-shard-<n>).
func ConsumerName(n int) string { return "ax-shard-" + strconv.Itoa(n) }

// consumersOf returns the report consumers shard n of shards works: n
// itself and, when fewer than protocol.DefaultShards shards are configured,
// the consumers n+shards, n+2×shards, ... below DefaultShards.
//
// An agent that has never registered reports on protocol.DefaultShards
// shards (it learns the configured count from its registration reply).
// Those early reports carry the full execution key, so which worker
// applies them does not matter for correctness (every write is
// compare-and-set on the revision).
func consumersOf(n, shards int) []int {
	out := []int{n}
	for k := n + shards; k < protocol.DefaultShards; k += shards {
		out = append(out, k)
	}
	return out
}

// EnsureConsumers creates (or updates) the per-shard durable consumers
// on AX_RPT, refusing a shard count other than the one they were made
// for (an error matching ErrShardCount). Attach comes first.
//
// The count is recorded in AX_RPT's metadata (streams.ReportShardsKey)
// the first time; versions that kept it only in the consumers' metadata
// are read from consumer 0. A consumer stored in files (made by such a
// version) is deleted and made again in memory (see consumerConfig); the
// reports it had not acknowledged stay in the work queue for the new one.
func (c *Ingest) EnsureConsumers(ctx context.Context) error {
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		return fmt.Errorf("report consumers: %w", err)
	}
	want := strconv.Itoa(c.cfg.Shards)
	made := st.CachedInfo().Config.Metadata[streams.ReportShardsKey]
	if made == "" {
		if made, err = c.shardsOfConsumers(ctx); err != nil {
			return err
		}
	}
	if made != "" && made != want {
		return &shardCountError{made: made, config: c.cfg.Shards}
	}
	if st.CachedInfo().Config.Metadata[streams.ReportShardsKey] != want {
		cfg := st.CachedInfo().Config
		cfg.Metadata = maps.Clone(cfg.Metadata)
		if cfg.Metadata == nil {
			cfg.Metadata = map[string]string{}
		}
		cfg.Metadata[streams.ReportShardsKey] = want
		if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("report consumers: record the shard count: %w", err)
		}
	}
	for n := range max(c.cfg.Shards, protocol.DefaultShards) {
		if err := c.ensureConsumer(ctx, n); err != nil {
			return fmt.Errorf("report consumer of shard %d: %w", n, err)
		}
	}
	return nil
}

// shardsOfConsumers returns the shard count in report consumer 0's
// metadata, "" when it has none or does not exist.
func (c *Ingest) shardsOfConsumers(ctx context.Context) (string, error) {
	cons, err := c.js.Consumer(ctx, protocol.StreamReports, ConsumerName(0))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("report consumers: %w", err)
	}
	return cons.CachedInfo().Config.Metadata[streams.ReportShardsKey], nil
}

// ensureConsumer makes report consumer n or updates it; one stored in
// files is deleted first (the storage of a consumer cannot be updated).
func (c *Ingest) ensureConsumer(ctx context.Context, n int) error {
	cons, err := c.js.Consumer(ctx, protocol.StreamReports, ConsumerName(n))
	switch {
	case err == nil && !cons.CachedInfo().Config.MemoryStorage:
		if err := c.js.DeleteConsumer(ctx, protocol.StreamReports, ConsumerName(n)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("delete the consumer stored in files: %w", err)
		}
	case err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound):
		return err
	}
	_, err = c.js.CreateOrUpdateConsumer(ctx, protocol.StreamReports, c.consumerConfig(n))
	return err
}

// StartShardWorker starts consuming shard n (lease.OwnershipHost's
// StartShardWorker: the shard ownership calls it when this replica
// acquires the shard, and stops the worker through lease.ShardWorker).
// The worker's goroutines run on the context given to Attach.
func (c *Ingest) StartShardWorker(ctx context.Context, n int) (lease.ShardWorker, error) {
	w := &shardWorker{c: c, n: n}
	w.ctx, w.cancel = context.WithCancel(c.ctx)
	for _, k := range consumersOf(n, c.cfg.Shards) {
		r := &consumerReader{w: w, k: k}
		if err := r.open(ctx); err != nil {
			for _, r := range w.readers {
				r.stop(false)
			}
			w.cancel()
			return nil, fmt.Errorf("report consumers of shard %d: %w", n, err)
		}
		w.readers = append(w.readers, r)
	}
	for range shardLanes {
		l := newLane(w)
		w.lanes = append(w.lanes, l)
		w.wg.Add(1)
		go func() { defer w.wg.Done(); l.run(w.ctx) }()
	}
	var readers sync.WaitGroup
	for _, r := range w.readers {
		readers.Add(1)
		w.wg.Add(1)
		go func() { defer w.wg.Done(); defer readers.Done(); r.run(w.ctx) }()
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		readers.Wait()
		for _, l := range w.lanes {
			close(l.in)
		}
	}()
	return w, nil
}

// Stop ends the worker and waits for it (lease.ShardWorker: the shard
// ownership stops it). With drain (a graceful hand-over) the messages
// already pulled are applied first, for at most drainMax; without (the
// lease was lost), or past drainMax, they are left unacknowledged for the
// next owner.
func (w *shardWorker) Stop(drain bool, drainMax time.Duration) {
	for _, r := range w.readers {
		r.stop(drain)
	}
	if !drain {
		w.cancel()
	}
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	if drain {
		t := time.NewTimer(drainMax)
		select {
		case <-done:
		case <-t.C:
			w.c.log.Warn("shard worker did not drain in time; leaving the rest to the next owner", "shard", w.n, "after", drainMax)
			for _, r := range w.readers {
				r.stop(false)
			}
		}
		t.Stop()
	}
	w.cancel()
	<-done
	// The report applied last (of this shard or another) may still hold
	// its acknowledgement back: it goes now, not with a later report
	// (ackkeep.go).
	w.c.acks.flush()
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
