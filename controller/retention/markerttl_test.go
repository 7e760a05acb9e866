package retention

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
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
	ctx, js, b := startBuckets(t)
	if !b.MsgTTL {
		t.Fatal("the buckets take no message TTLs")
	}
	type key struct{ bucket, key string }
	// retire stores an execution, a job and an idempotency key named
	// after name and removes them with markers of TTL ttl.
	retire := func(name string, ttl time.Duration) []key {
		r := attached(js, b, ttl)
		execs := r.execs
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

// TestPurgeMarkersUpTo: on buckets whose markers carry no TTL, a purge of
// the markers written up to a time (what SweepAll's passes after the
// first make: those written a sweep interval or more before) empties
// their keys' subjects and keeps the later ones, which a purge of all
// (a pass's first step) then takes.
func TestPurgeMarkersUpTo(t *testing.T) {
	ctx, js, b := startBuckets(t)
	r := attached(js, b, 0) // markers without a TTL
	jobs := func(key string) uint64 { return held(t, ctx, js, protocol.BucketJobs, key) }
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	s := NewSweeper()
	for _, k := range []struct {
		key string
		at  time.Time
	}{{"old", t0}, {"new", t0.Add(time.Minute)}} {
		rev, err := b.Jobs.Put(ctx, k.key, []byte("spec"))
		if err != nil {
			t.Fatal(err)
		}
		seq, err := r.purgeKey(ctx, protocol.BucketJobs, k.key, rev)
		if err != nil {
			t.Fatal(err)
		}
		s.markers = append(s.markers, pendingMarker{execstore.Marker{Stream: streams.KVStream(protocol.BucketJobs),
			Subject: streams.KVSubject(protocol.BucketJobs, k.key), Seq: seq}, k.at})
	}
	r.purgeMarkers(ctx, s, t0.Add(30*time.Second))
	if n := jobs("old"); n != 0 {
		t.Errorf("the marker written before the time: %d messages left on its subject, want 0", n)
	}
	if n := jobs("new"); n != 1 {
		t.Errorf("the marker written after the time: %d messages on its subject, want the marker", n)
	}
	if len(s.markers) != 1 || s.markers[0].Subject != streams.KVSubject(protocol.BucketJobs, "new") {
		t.Fatalf("markers kept %+v, want the later one alone", s.markers)
	}
	r.purgeMarkers(ctx, s, time.Time{})
	if n := jobs("new"); n != 0 || len(s.markers) != 0 {
		t.Errorf("after a purge of all: %d messages on the later key's subject, %d markers kept; want 0, 0", n, len(s.markers))
	}
}
