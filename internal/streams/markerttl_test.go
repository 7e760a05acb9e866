package streams

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestMarkedBucketsTakeMessageTTLs: after Ensure, ax_jobs, ax_execs and
// ax_idem take per-message TTLs and say so (Buckets.MsgTTL), on a new
// store and on one whose buckets an earlier version made without them (its
// digest in the metadata); the other buckets stay without. The digest is
// the one an earlier version computes (so that it binds the buckets and
// does not update them); an update for another digest keeps the TTLs. A
// purge marker with a TTL on a key of ax_jobs removes the key and then
// leaves the stream by itself, and the server places no marker of its own
// after it.
func TestMarkedBucketsTakeMessageTTLs(t *testing.T) {
	marked := map[string]bool{protocol.BucketJobs: true, protocol.BucketExecs: true, protocol.BucketIdem: true}
	check := func(t *testing.T, js jetstream.JetStream, ctx context.Context, b Buckets) {
		t.Helper()
		if !b.MsgTTL {
			t.Error("Buckets.MsgTTL false on nats-server 2.15")
		}
		for _, kc := range (Config{}).KVConfigs() {
			st, err := js.Stream(ctx, KVStream(kc.Bucket))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config.AllowMsgTTL; got != marked[kc.Bucket] {
				t.Errorf("%s takes message TTLs: %v, want %v", kc.Bucket, got, marked[kc.Bucket])
			}
		}
	}
	t.Run("new store", func(t *testing.T) {
		js, ctx := startJetStream(t)
		for round := 1; round <= 2; round++ {
			b, err := Ensure(ctx, js, Config{})
			if err != nil {
				t.Fatalf("Ensure %d: %v", round, err)
			}
			check(t, js, ctx, b)
		}
	})
	t.Run("buckets of an earlier version", func(t *testing.T) {
		js, ctx := startJetStream(t)
		for _, kc := range (Config{}).KVConfigs() {
			kc.LimitMarkerTTL = 0
			digest, err := configDigest(kc)
			if err != nil {
				t.Fatal(err)
			}
			setMetadata(&kc.Metadata, ConfigKey, digest)
			if _, err := js.CreateKeyValue(ctx, kc); err != nil {
				t.Fatal(err)
			}
		}
		b, err := Ensure(ctx, js, Config{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, js, ctx, b)
	})
	t.Run("the digest an earlier version wrote", func(t *testing.T) {
		// An ax built before the TTLs computes the digest of the config
		// without LimitMarkerTTL: it finds its own and binds the buckets
		// without an update (which would try to take the TTLs away).
		js, ctx := startJetStream(t)
		if _, err := Ensure(ctx, js, Config{}); err != nil {
			t.Fatal(err)
		}
		for _, kc := range (Config{}).KVConfigs() {
			kc.LimitMarkerTTL = 0
			want, err := configDigest(kc)
			if err != nil {
				t.Fatal(err)
			}
			st, err := js.Stream(ctx, KVStream(kc.Bucket))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config.Metadata[ConfigKey]; got != want {
				t.Errorf("%s: digest %s, want %s (the config without LimitMarkerTTL)", kc.Bucket, got, want)
			}
		}
	})
	t.Run("an update for other settings keeps them", func(t *testing.T) {
		js, ctx := startJetStream(t)
		if _, err := Ensure(ctx, js, Config{}); err != nil {
			t.Fatal(err)
		}
		// Another digest (another version's settings): the next Ensure
		// updates every marked bucket, with its TTLs.
		for b := range marked {
			st, err := js.Stream(ctx, KVStream(b))
			if err != nil {
				t.Fatal(err)
			}
			cfg := st.CachedInfo().Config
			cfg.Metadata[ConfigKey] = "another"
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		b, err := Ensure(ctx, js, Config{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, js, ctx, b)
	})
	t.Run("a marker with a TTL leaves by itself", func(t *testing.T) {
		js, ctx := startJetStream(t)
		b, err := Ensure(ctx, js, Config{})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := b.Jobs.Put(ctx, "job-1", []byte("spec"))
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(KVSubject(protocol.BucketJobs, "job-1"))
		m.Header.Set("KV-Operation", "PURGE")
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		if _, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, KVStream(protocol.BucketJobs))
		if err != nil {
			t.Fatal(err)
		}
		msgs := func() uint64 {
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info.State.Msgs
		}
		if n := msgs(); n != 1 {
			t.Fatalf("%d messages after the marker, want the marker alone", n)
		}
		testutil.Eventually(t, 10*time.Second, "the marker gone from ax_jobs", func() bool { return msgs() == 0 })
		// Nothing comes after it: no marker of the server's own (the
		// bucket's LimitMarkerTTL) for the subject the TTL emptied.
		last := msgs()
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if last != 0 || info.State.LastSeq != rev+1 {
			t.Errorf("after the marker left: %d messages, last sequence %d; want none and %d (the marker's)", last, info.State.LastSeq, rev+1)
		}
	})
}
