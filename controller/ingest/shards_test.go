package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// ensureWith runs EnsureConsumers of an ingest configured for shards on
// js (no worker, no ownership: EnsureConsumers needs neither).
func ensureWith(ctx context.Context, t *testing.T, js jetstream.JetStream, shards int) error {
	t.Helper()
	c := New(Env{Config: Config{Shards: shards, AckWait: 2 * time.Second, LeaseTTL: 15 * time.Second, Replicas: 1},
		Log: testutil.Logger()}, nil)
	c.Attach(ctx, nil, js, execstore.Store{})
	return c.EnsureConsumers(ctx)
}

// reportMeta returns AX_RPT's recorded shard count ("" when none).
func reportMeta(ctx context.Context, t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().Config.Metadata[streams.ReportShardsKey]
}

// TestShardCountSurvivesServerRestart: the report consumers keep their
// state in memory, so a restart of the server loses them; the shard count
// they were made for is recorded in AX_RPT's metadata, which Ensure keeps,
// so a start with another count is still refused afterwards and the same
// count makes the consumers again (in memory).
func TestShardCountSurvivesServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 60*time.Second)
	if _, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1, ReportShards: 8}); err != nil {
		t.Fatal(err)
	}
	if err := ensureWith(ctx, t, js, 8); err != nil {
		t.Fatal(err)
	}
	if got := reportMeta(ctx, t, js); got != "8" {
		t.Fatalf("AX_RPT's shard count = %q, want 8", got)
	}
	for n := range protocol.DefaultShards {
		cons, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(n))
		if err != nil {
			t.Fatal(err)
		}
		if !cons.CachedInfo().Config.MemoryStorage {
			t.Fatalf("consumer %s stores its state in files", ConsumerName(n))
		}
	}

	srv.Restart()
	_, js = natstest.JetStream(t, srv.URL())
	if _, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(0)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("consumer 0 after a restart of the server: %v, want not found (state in memory)", err)
	}
	// Ensure updates the stream with its own config, which has no
	// metadata: the recorded count must survive it.
	if _, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1, ReportShards: 4}); err != nil {
		t.Fatal(err)
	}
	if err := ensureWith(ctx, t, js, 4); !errors.Is(err, ErrShardCount) {
		t.Fatalf("EnsureConsumers with 4 shards after 8: %v, want ErrShardCount", err)
	}
	if err := ensureWith(ctx, t, js, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(protocol.DefaultShards-1)); err != nil {
		t.Fatalf("consumers made again: %v", err)
	}
}

// TestFileConsumersOfAnEarlierVersion: an earlier version made the report
// consumers stored in files and kept the shard count in their metadata
// only. That count is still enforced, and is not recorded in the stream by
// a refused start (the corrected config then starts); the matching start
// records it, makes the consumers again in memory, and the report the old
// consumer had not acknowledged is delivered by the new one.
func TestFileConsumersOfAnEarlierVersion(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 60*time.Second)
	if _, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1, ReportShards: 4}); err != nil {
		t.Fatal(err)
	}
	legacy := jetstream.ConsumerConfig{Durable: ConsumerName(0), FilterSubject: protocol.ReportShardSubject(0),
		AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1, Metadata: map[string]string{streams.ReportShardsKey: "4"}}
	old, err := js.CreateOrUpdateConsumer(ctx, protocol.StreamReports, legacy)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"acknowledged", "left"} {
		if err := nc.Publish(protocol.ReportSubject(0, "a1"), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	batch, err := old.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if err := ensureWith(ctx, t, js, 16); !errors.Is(err, ErrShardCount) {
		t.Fatalf("EnsureConsumers with 16 shards, consumers made for 4: %v, want ErrShardCount", err)
	}
	if got := reportMeta(ctx, t, js); got != "" {
		t.Fatalf("a refused start recorded %q as the shard count", got)
	}
	if err := ensureWith(ctx, t, js, 4); err != nil {
		t.Fatal(err)
	}
	if got := reportMeta(ctx, t, js); got != "4" {
		t.Fatalf("AX_RPT's shard count = %q, want 4", got)
	}
	cons, err := js.Consumer(ctx, protocol.StreamReports, ConsumerName(0))
	if err != nil {
		t.Fatal(err)
	}
	if !cons.CachedInfo().Config.MemoryStorage {
		t.Fatal("consumer 0 still stores its state in files")
	}
	batch, err = cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
	}
	if len(got) != 1 || got[0] != "left" {
		t.Fatalf("the new consumer delivered %q, want the one report not acknowledged (\"left\")", got)
	}
}
