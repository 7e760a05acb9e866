package jobcache

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// laterJob is a delayed one-shot job like the "close the order 30 minutes
// later" case: pinned, with a payload of its own.
func laterJob(i int, at time.Time) protocol.Job {
	return protocol.Job{ID: protocol.NewJobID("ctl-1", at.Add(time.Duration(i/5000)*time.Second), uint32(i*7919)),
		Name: fmt.Sprintf("close-order-%d", i), Handler: "http",
		Payload:  json.RawMessage(fmt.Sprintf(`{"method":"POST","url":"http://shop.local/orders/%d/close"}`, i)),
		Schedule: schedule.Spec{Delay: "30m"}, Target: protocol.Target{Agent: "edge-1"},
		Generation: 1, CreatedAt: at}.WithDefaults()
}

// laterJobs returns laterJob 0 … n-1, created at one instant: the
// benchmarks' 100,000 delayed one-shots.
func laterJobs(n int) []protocol.Job {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jobs := make([]protocol.Job, n)
	for i := range jobs {
		jobs[i] = laterJob(i, at)
	}
	return jobs
}

// TestOneShotHeldCompact: a one-shot job is held in its compact form,
// not as a decoded spec, and comes back from Get, Page and LiveWhere equal to what
// was put, whether put by this replica (Put) or by the watcher (Apply,
// with the stored bytes); Brief tells its kind, generation, creation and
// pause without decoding it. A periodic job is held decoded.
func TestOneShotHeldCompact(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jc := New(nil)
	put := laterJob(1, at)
	put.Paused = true
	jc.Put(put, 3)
	applied := laterJob(2, at.Add(time.Second))
	data, err := json.Marshal(applied)
	if err != nil {
		t.Fatal(err)
	}
	jc.Apply(kvEntry{key: applied.ID, val: data, rev: 4}, nil)
	periodic := protocol.Job{ID: "p1", Name: "tick", Handler: "noop", Schedule: schedule.Spec{Every: "1m"},
		Target: protocol.Target{Agent: "edge-1"}, Generation: 2, CreatedAt: at}
	jc.Put(periodic, 5)

	for _, want := range []protocol.Job{put, applied} {
		cj := jc.jobs[want.ID]
		if cj.job != nil || cj.one == "" {
			t.Errorf("%s: held decoded (%v), want its compact form only", want.ID, cj.job != nil)
		}
		got, _, ok := jc.Get(want.ID)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Get(%s) = %+v (%v), want %+v", want.ID, got, ok, want)
		}
		b, ok := jc.Brief(want.ID)
		wantB := Brief{ID: want.ID, Rev: cj.rev, Periodic: false, Paused: want.Paused, Generation: 1}
		created := b.CreatedAt
		b.CreatedAt = time.Time{}
		if !ok || b != wantB || !created.Equal(want.CreatedAt) {
			t.Errorf("Brief(%s) = %+v (%v), want %+v", want.ID, b, ok, wantB)
		}
	}
	if cj := jc.jobs["p1"]; cj.job == nil || cj.one != "" {
		t.Errorf("periodic job held compact, want decoded")
	}
	if b, ok := jc.Brief("p1"); !ok || !b.Periodic || b.Generation != 2 || !b.CreatedAt.Equal(at) {
		t.Errorf("Brief(p1) = %+v (%v), want periodic, generation 2", b, ok)
	}
	page := jc.Page("", 10, func(j *protocol.Job) bool { return j.Handler == "http" })
	if len(page) != 2 || !reflect.DeepEqual(page[0], put) && !reflect.DeepEqual(page[1], put) {
		t.Errorf("page of the http jobs: %+v, want the two one-shots", page)
	}
	var briefs int
	got := jc.LiveWhere(func(b Brief) bool { briefs++; return !b.Periodic && !b.Paused },
		func(j *protocol.Job) bool { return j.Target.Agent == "edge-1" })
	if briefs != 3 || len(got) != 1 || !reflect.DeepEqual(got[0], applied) {
		t.Errorf("LiveWhere looked at %d briefs and kept %+v, want 3 and the unpaused one-shot", briefs, got)
	}
	jc.Remove(put.ID, 6)
	if jc.Has(put.ID) {
		t.Errorf("%s is live after its removal", put.ID)
	}
	if _, _, ok := jc.DeletedPeriodic(put.ID); ok {
		t.Errorf("the tombstone of one-shot %s keeps a spec", put.ID)
	}
}

// TestOneShotChangesKind: a job updated from one-shot to periodic and
// back is held decoded and then as JSON, and the registration indexes
// follow; the entry of an older revision changes nothing.
func TestOneShotChangesKind(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jc := New(nil)
	j := laterJob(7, at)
	jc.Put(j, 1)
	p := j
	p.Schedule, p.Generation = schedule.Spec{Every: "5m"}, 2
	jc.Put(p, 2)
	if got := jc.PinnedTo("edge-1"); len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("pinned after the change to periodic: %+v", got)
	}
	j.Generation = 3
	jc.Put(j, 3)
	jc.Put(p, 2) // older: ignored
	if got := jc.PinnedTo("edge-1"); len(got) != 0 {
		t.Fatalf("pinned after the change back to one-shot: %+v", got)
	}
	if got, rev, ok := jc.Get(j.ID); !ok || rev != 3 || !reflect.DeepEqual(got, j) {
		t.Fatalf("Get after the changes = %+v at %d, want %+v at 3", got, rev, j)
	}
	if n := jc.ids.Len(); n != 1 {
		t.Fatalf("the id index holds %d ids, want 1", n)
	}
}

// BenchmarkJobCacheMemory reports the heap a live job takes in the cache
// (bytes/job), for 100,000 delayed one-shot jobs held in their compact
// form (oneshot) against the same jobs held decoded, as every job was
// before (decoded: the form a periodic job keeps).
func BenchmarkJobCacheMemory(b *testing.B) {
	const n = 100_000
	jobs := laterJobs(n)
	for _, arm := range []string{"oneshot", "decoded"} {
		b.Run(arm, func(b *testing.B) {
			var per float64
			for b.Loop() {
				per, _ = heldBytes(jobs, arm == "decoded", 0)
			}
			b.ReportMetric(per, "bytes/job")
		})
	}
}

// heldBytes puts jobs into a new cache and returns the heap it keeps per
// job once collected: live bytes (HeapAlloc) and bytes of spans in use
// (HeapInuse). decoded holds them as periodic jobs are held; garbage
// short-lived strings of sizes near the cache's own are allocated
// alongside each put and dropped before the reading.
func heldBytes(jobs []protocol.Job, decoded bool, garbage int) (live, inuse float64) {
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	jc := New(nil)
	jc.reserve(len(jobs))
	short := make([]string, 0, garbage*len(jobs))
	for i, j := range jobs {
		if decoded {
			// A periodic job is held decoded; with no target it enters no
			// registration index.
			j.Schedule, j.Target = schedule.Spec{Every: "30m"}, protocol.Target{}
		}
		j.ID = fmt.Sprintf("%s-%d", j.ID, i) // a string of its own, as decoded from KV
		for k := range garbage {
			short = append(short, strings.Repeat("g", 24+k*48))
		}
		jc.Put(j, uint64(i+1))
	}
	short = nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	runtime.KeepAlive(jc)
	runtime.KeepAlive(short)
	n := float64(len(jobs))
	return float64(ms1.HeapAlloc-ms0.HeapAlloc) / n, float64(ms1.HeapInuse-ms0.HeapInuse) / n
}

// benchFill runs add for job 0, 1, … of n into a cache sized for n,
// once per iteration of b, with a fresh cache (untimed) after every n:
// the cost of one job's way into a cache that holds up to n.
func benchFill(b *testing.B, n int, add func(jc *Cache, i int)) {
	b.Helper()
	jc := New(nil)
	jc.reserve(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			jc = New(nil)
			jc.reserve(n)
			i = 0
			b.StartTimer()
		}
		add(jc, i)
		i++
	}
}

// BenchmarkJobCachePut is the cost of putting one one-shot job into a
// cache that holds 100,000 (a create on this replica, or a value of the
// watcher's load after its decode): time and allocations per job, the
// compact form included.
func BenchmarkJobCachePut(b *testing.B) {
	const n = 100_000
	jobs := laterJobs(n)
	benchFill(b, n, func(jc *Cache, i int) { jc.Put(jobs[i], uint64(i+1)) })
}

// BenchmarkJobCacheApply is the load's cost per stored one-shot job: the
// watcher's value decoded and put into a cache that holds 100,000.
func BenchmarkJobCacheApply(b *testing.B) {
	const n = 100_000
	entries := make([]kvEntry, n)
	for i, j := range laterJobs(n) {
		data, err := json.Marshal(j)
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = kvEntry{key: j.ID, val: data, rev: uint64(i + 1), created: j.CreatedAt}
	}
	log := slog.New(slog.DiscardHandler)
	benchFill(b, n, func(jc *Cache, i int) { jc.Apply(entries[i], log) })
}
