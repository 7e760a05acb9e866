package jobcache

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestCompactKnowsEveryField fails when protocol.Job, its Target or its
// Schedule gains a field: compact must learn to hold it (toCompact,
// expand) before a one-shot job's new field is dropped by the cache.
func TestCompactKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		known []string
	}{
		{reflect.TypeFor[protocol.Job](), []string{"ID", "Name", "Handler", "Payload", "Schedule", "Target", "Priority", "Timeout",
			"Retry", "Misfire", "Overlap", "Concurrency", "IdempotencyKey", "Precision", "Paused", "Generation", "CreatedAt"}},
		{reflect.TypeFor[protocol.Target](), []string{"Agent", "Group", "Mode"}},
		{reflect.TypeFor[schedule.Spec](), []string{"Asap", "At", "Delay", "Every", "Cron", "Timezone"}},
	} {
		for i := range tc.typ.NumField() {
			if f := tc.typ.Field(i); !slices.Contains(tc.known, f.Name) {
				t.Errorf("%s.%s is not held by jobcache's compact form: add it to toCompact and expand", tc.typ, f.Name)
			}
		}
	}
}

// TestCompactRoundTrip: for random one-shot jobs, the cache's entry gives
// back the job that was put, field for field (CreatedAt as the same
// instant in UTC), whether it is held compact or, for values compact
// cannot hold, decoded; both forms occur.
func TestCompactRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	in := newInterner()
	var compactN, decodedN int
	for i := range 5000 {
		j := protocol.Job{ID: protocol.NewJobID("ctl-1", time.Unix(1_800_000_000+int64(i), 0), uint32(i)),
			Name: pick("a", "close-order-1", ""), Handler: pick("exec", "http", "noop"),
			Priority: r.IntN(10), Timeout: protocol.Duration(r.Int64N(int64(time.Hour))), Concurrency: r.IntN(4),
			IdempotencyKey: pick("", "k-1"), Paused: r.IntN(2) == 0, Generation: uint64(r.IntN(3)),
			Target:    protocol.Target{Agent: pick("", "edge-1"), Group: pick("", "site=x"), Mode: pick("", "any", "all", "odd")},
			Overlap:   pick("", "forbid", "queue", "allow", "other"),
			Precision: pick("", "normal", "fine", "other")}
		if r.IntN(2) == 0 {
			j.Payload = json.RawMessage(pick(`{"command":"/bin/true"}`, `[1,2]`, `"x"`))
		}
		if r.IntN(2) == 0 {
			j.Retry = protocol.RetrySpec{MaxAttempts: r.IntN(5), Base: protocol.Duration(time.Second), OnTimeout: r.IntN(2) == 0}
		}
		if r.IntN(2) == 0 {
			j.Misfire = protocol.MisfireSpec{Policy: pick("skip", "fire_once"), Cap: r.IntN(3)}
		}
		switch r.IntN(6) {
		case 0:
			j.Schedule = schedule.Spec{Asap: true}
		case 1:
			j.Schedule = schedule.Spec{At: "2026-12-01T02:00:00Z"}
		case 2:
			j.Schedule = schedule.Spec{Delay: pick("30m", "1s")}
		case 3:
			j.Schedule = schedule.Spec{Delay: "30m", Timezone: "Europe/Paris"} // not compact
		case 4:
			j.Schedule = schedule.Spec{Asap: true, At: "2026-12-01T02:00:00Z"} // not compact
		case 5:
			j.Priority, j.Concurrency = math.MaxInt32+1, -3 // varints: any int
			j.Timeout = -1
			j.Name = strings.Repeat("n", 200+r.IntN(300)) // a length past one varint byte
			j.Schedule = schedule.Spec{Asap: true}
		}
		switch r.IntN(3) {
		case 0:
			j.CreatedAt = time.Unix(1_800_000_000, int64(r.IntN(1e9))).UTC()
		case 1:
			j.CreatedAt = time.Unix(1_800_000_000, 5).In(time.FixedZone("x", 3600)) // same instant, other zone
		}
		cj := entryOf(&j, 7, in, &slab{})
		if cj.one != "" {
			compactN++
		} else {
			decodedN++
		}
		got := cj.spec(j.ID, in.tab)
		if !got.CreatedAt.Equal(j.CreatedAt) {
			t.Fatalf("job %d: created_at %v, want %v", i, got.CreatedAt, j.CreatedAt)
		}
		got.CreatedAt, j.CreatedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, j) {
			t.Fatalf("job %d (compact %v):\n got %+v\nwant %+v", i, cj.one != "", got, j)
		}
	}
	if compactN == 0 || decodedN == 0 {
		t.Fatalf("%d jobs held compact and %d decoded; want both forms", compactN, decodedN)
	}
}

// TestCompactFullTables: once an intern table is full, a new string is
// held in the compact form itself and a new retry or misfire spec makes
// the job held decoded; both give the job back as it was put, and the
// values interned before still resolve.
func TestCompactFullTables(t *testing.T) {
	in := newInterner()
	for i := range maxInterned {
		if _, ok := intern(in.strIdx, &in.tab.strs, fmt.Sprintf("h%d", i)); !ok {
			t.Fatalf("table full at %d, want room for %d", i, maxInterned)
		}
		if _, ok := intern(in.retryIdx, &in.tab.retries, protocol.RetrySpec{MaxAttempts: i + 1}); !ok {
			t.Fatalf("retry table full at %d", i)
		}
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		job     protocol.Job
		compact bool
	}{
		{"new strings inline", protocol.Job{ID: "j1", Name: "a", Handler: "new-handler", Schedule: schedule.Spec{Delay: "17m"},
			Target: protocol.Target{Agent: "edge-new", Group: "site=new"}, Generation: 1, CreatedAt: at}, true},
		{"interned strings and retry", protocol.Job{ID: "j2", Handler: "h7", Schedule: schedule.Spec{Asap: true},
			Target: protocol.Target{Agent: "h4095"}, Retry: protocol.RetrySpec{MaxAttempts: 3}, Generation: 1, CreatedAt: at}, true},
		{"new retry spec", protocol.Job{ID: "j3", Handler: "h1", Schedule: schedule.Spec{Asap: true},
			Retry: protocol.RetrySpec{MaxAttempts: maxInterned + 5}, Generation: 1, CreatedAt: at}, false},
	} {
		cj := entryOf(&tc.job, 1, in, &slab{})
		if (cj.one != "") != tc.compact {
			t.Errorf("%s: held compact %v, want %v", tc.name, cj.one != "", tc.compact)
		}
		if got := cj.spec(tc.job.ID, in.tab); !reflect.DeepEqual(got, tc.job) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.job)
		}
	}
	if n := len(in.tab.strs); n != maxInterned {
		t.Errorf("string table holds %d, want it to stay at %d", n, maxInterned)
	}
}
