package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// The pieces of a sweep alone; the tests of the sweeper in whole
// controllers (what leaves live state and when, late reports, restarts,
// the backlog of a pass) are the controller package's
// (TestRetentionRemovesEndedWork, TestRetentionShortDedupWindow,
// TestSweepPassTakesTheWholeBacklog and the like).

// TestParallel: parallel runs every index once, k at a time (all of
// them when fewer), never more, and returns when all have ended.
func TestParallel(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{0, 4}, {1, 4}, {3, 1}, {100, 7}, {64, 32}} {
		var (
			mu           sync.Mutex
			seen         = map[int]int{}
			inFlight     atomic.Int32
			most, ending atomic.Int32
		)
		parallel(tc.n, tc.k, func(i int) {
			cur := inFlight.Add(1)
			for {
				m := most.Load()
				if cur <= m || most.CompareAndSwap(m, cur) {
					break
				}
			}
			// Hold until as many run as parallel may run at once (k, or
			// all that are left; a deadline keeps a parallel that runs
			// fewer from hanging), then yield a while, so that a call
			// started past k would be counted in most.
			deadline := time.Now().Add(5 * time.Second)
			for inFlight.Load() < int32(min(tc.k, tc.n-int(ending.Load()))) && time.Now().Before(deadline) {
				runtime.Gosched()
			}
			for range 100 {
				runtime.Gosched()
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			inFlight.Add(-1)
			ending.Add(1)
		})
		if got := int(ending.Load()); got != tc.n {
			t.Errorf("n=%d k=%d: %d calls ended at return, want %d", tc.n, tc.k, got, tc.n)
		}
		for i := range tc.n {
			if seen[i] != 1 {
				t.Errorf("n=%d k=%d: index %d ran %d times, want 1", tc.n, tc.k, i, seen[i])
			}
		}
		if m, want := int(most.Load()), min(tc.n, tc.k); m != want {
			t.Errorf("n=%d k=%d: %d ran at once, want %d", tc.n, tc.k, m, want)
		}
	}
}

// TestPurgeKey: on a real nats-server, a purge marker with the revision
// read removes the key (its earlier messages go with the rollup) and
// returns the marker's sequence; with a stale revision it matches
// execstore.ErrCASConflict and the key stays.
func TestPurgeKey(t *testing.T) {
	ctx, js, b := startBuckets(t)
	r := attached(js, b, 0)

	rev1, err := b.Jobs.Put(ctx, "job-1", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := b.Jobs.Put(ctx, "job-1", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.purgeKey(ctx, protocol.BucketJobs, "job-1", rev1); !errors.Is(err, execstore.ErrCASConflict) {
		t.Fatalf("purgeKey with a stale revision = %v, want ErrCASConflict", err)
	}
	if e, err := b.Jobs.Get(ctx, "job-1"); err != nil || string(e.Value()) != "b" {
		t.Fatalf("after the lost compare-and-set: %v, %v; want the key kept", e, err)
	}
	seq, err := r.purgeKey(ctx, protocol.BucketJobs, "job-1", rev2)
	if err != nil {
		t.Fatal(err)
	}
	if seq <= rev2 {
		t.Errorf("marker sequence %d, want after the last revision %d", seq, rev2)
	}
	if _, err := b.Jobs.Get(ctx, "job-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after the purge: %v, want ErrKeyNotFound", err)
	}
	if n := held(t, ctx, js, protocol.BucketJobs, "job-1"); n != 1 {
		t.Errorf("%d messages left on the key's subject, want the marker alone", n)
	}
}

// startBuckets starts a real nats-server and makes ax's buckets on it.
func startBuckets(t *testing.T) (context.Context, jetstream.JetStream, streams.Buckets) {
	t.Helper()
	_, js := natstest.JetStream(t, natstest.Start(t).URL())
	ctx := testutil.Context(t, 60*time.Second)
	b, err := streams.Ensure(ctx, js, streams.Config{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, js, b
}

// attached returns a retention attached to b, whose execution store's
// purge markers carry markerTTL (0: none, the next pass purges them).
func attached(js jetstream.JetStream, b streams.Buckets, markerTTL time.Duration) *Retention {
	r := New(Env{Log: testutil.Logger()}, nil)
	r.Attach(js, b.Idem, execstore.New(b.Execs, js, time.Second).WithMarkerTTL(markerTTL), nil)
	return r
}

// held returns the messages key's subject holds in bucket's stream.
func held(t *testing.T, ctx context.Context, js jetstream.JetStream, bucket, key string) uint64 {
	t.Helper()
	st, err := js.Stream(ctx, streams.KVStream(bucket))
	if err != nil {
		t.Fatal(err)
	}
	subject := streams.KVSubject(bucket, key)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// TestTakeDeletedInBatches: the jobs NoteDeleted was given are taken at
// most n a call, each once, and a note made after a take does not change
// what that take returned.
func TestTakeDeletedInBatches(t *testing.T) {
	c := &Retention{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		c.NoteDeleted(id)
	}
	seen := map[string]int{}
	first := c.takeDeleted(3)
	firstCopy := append([]string(nil), first...)
	c.NoteDeleted("h")
	var sizes []int
	for _, b := range [][]string{first, c.takeDeleted(3), c.takeDeleted(3), c.takeDeleted(3), c.takeDeleted(3)} {
		sizes = append(sizes, len(b))
		for _, id := range b {
			seen[id]++
		}
	}
	if len(seen) != 8 {
		t.Fatalf("taken %v, want each of a–h", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s taken %d times", id, n)
		}
	}
	if sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 2 || sizes[3] != 0 {
		t.Errorf("batch sizes %v, want 3 3 2 0 0", sizes)
	}
	for i := range first {
		if first[i] != firstCopy[i] {
			t.Fatalf("the first take changed after a note: %v, was %v", first, firstCopy)
		}
	}
}

// TestFailuresLogOnce: a step whose requests fail logs one line with how
// many failed and the first failure, however many there were; a step
// without failures logs nothing.
func TestFailuresLogOnce(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	var f failures
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.add(fmt.Sprintf("exec-%d", i), errors.New("nats: timeout"))
		}()
	}
	wg.Wait()
	f.log(l, "history sweep: remove executions", "exec")
	var empty failures
	empty.log(l, "history sweep: retire jobs", "job")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines logged, want 1:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "history sweep: remove executions" || rec["failed"] != float64(50) || rec["err"] != "nats: timeout" ||
		!strings.HasPrefix(fmt.Sprint(rec["exec"]), "exec-") {
		t.Errorf("logged %v, want the step, failed=50, the first exec and its error", rec)
	}
}
