package retention

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestMarkersCarryTheTTL: with the execution store's marker TTL set, the
// purge markers of a retirement (an execution's through Retire, a job's
// and an idempotency key's through purgeKey and ReleaseIdem) carry it,
// none is handed back for a pass to purge, and each key's subject in
// ax_execs, ax_jobs and ax_idem is left empty by the server alone.
func TestMarkersCarryTheTTL(t *testing.T) {
	_, js := natstest.JetStream(t, natstest.Start(t).URL())
	ctx := testutil.Context(t, 60*time.Second)
	b, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !b.MsgTTL {
		t.Fatal("the buckets take no message TTLs")
	}
	type key struct{ bucket, key string }
	// retire stores an execution, a job and an idempotency key named
	// after name and removes them with markers of TTL ttl.
	retire := func(name string, ttl time.Duration) []key {
		execs := execstore.New(b.Execs, js, time.Second).WithMarkerTTL(ttl)
		r := New(Env{Log: testutil.Logger()}, nil)
		r.Attach(js, b.Idem, execs, nil)
		now := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
		job := "ax-" + name + "-20261206210000-abcdef"
		rec, _, err := execution.Apply(nil, execution.Create{ExecID: protocol.ExecID(job, now), JobID: job, Agent: "edge-1",
			ScheduledAt: now, Reason: "scheduled"}, execution.Env{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		erev, err := execs.Put(ctx, execstore.Version{}, rec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := execs.Retire(ctx, rec.ExecID, erev)
		if err != nil || m != nil {
			t.Fatalf("Retire = %+v, %v; want no marker to purge", m, err)
		}
		jrev, err := b.Jobs.Put(ctx, job, []byte("spec"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.purgeKey(ctx, protocol.BucketJobs, job, jrev); err != nil {
			t.Fatal(err)
		}
		irev, err := b.Idem.Put(ctx, "key-"+name, []byte(job))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ReleaseIdem(ctx, "key-"+name, irev); err != nil {
			t.Fatal(err)
		}
		return []key{{protocol.BucketExecs, rec.ExecID}, {protocol.BucketJobs, job}, {protocol.BucketIdem, "key-" + name}}
	}
	stream := func(bucket string) jetstream.Stream {
		st, err := js.Stream(ctx, streams.KVStream(bucket))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Markers that stay the test's length: each carries the TTL.
	for _, k := range retire("long", time.Hour) {
		last, err := stream(k.bucket).GetLastMsgForSubject(ctx, streams.KVSubject(k.bucket, k.key))
		if err != nil {
			t.Fatalf("%s/%s: %v", k.bucket, k.key, err)
		}
		if got := last.Header.Get(jetstream.MsgTTLHeader); got != time.Hour.String() {
			t.Errorf("%s/%s: marker's %s %q, want %q", k.bucket, k.key, jetstream.MsgTTLHeader, got, time.Hour.String())
		}
	}
	// Markers of the least TTL: the server removes them.
	for _, k := range retire("short", time.Second) {
		st, subject := stream(k.bucket), streams.KVSubject(k.bucket, k.key)
		testutil.Eventually(t, 10*time.Second, subject+" empty", func() bool {
			info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(subject))
			return err == nil && info.State.Subjects[subject] == 0
		})
	}
}

// TestMarkerTTL: one pass of the sweeper, in whole seconds, at least one.
func TestMarkerTTL(t *testing.T) {
	for _, tc := range []struct{ sweep, want time.Duration }{
		{0, time.Minute},
		{20 * time.Millisecond, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{5 * time.Minute, 5 * time.Minute},
	} {
		if got := MarkerTTL(tc.sweep); got != tc.want {
			t.Errorf("MarkerTTL(%v) = %v, want %v", tc.sweep, got, tc.want)
		}
	}
}
