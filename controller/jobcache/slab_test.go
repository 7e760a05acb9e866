package jobcache

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestSlabCopies: a string from the slab equals what was added and does
// not change when the source buffer does; one longer than slabMax is a
// heap string of its own that the slab does not count.
func TestSlabCopies(t *testing.T) {
	var s slab
	buf := []byte("job-1")
	got := s.add(buf)
	copy(buf, "XXXXX")
	if got != "job-1" {
		t.Fatalf("slab string = %q after its source changed, want job-1", got)
	}
	if s.used != 5 || s.live != 5 {
		t.Fatalf("used, live = %d, %d after one add of 5 bytes, want 5, 5", s.used, s.live)
	}
	long := strings.Repeat("p", slabMax+1)
	if v := s.addString(long); v != long || s.used != 5 || s.live != 5 {
		t.Fatalf("a string over slabMax: equal %v, used %d, live %d; want equal, 5, 5", v == long, s.used, s.live)
	}
	s.release(long)
	s.release(got)
	if s.live != 0 {
		t.Fatalf("live = %d after releasing both, want 0", s.live)
	}
	// Chunks fill and a new one starts; earlier strings stay intact.
	var held []string
	for i := range 3 * slabChunk / 100 {
		held = append(held, s.addString(fmt.Sprintf("%0100d", i)))
	}
	for i, v := range held {
		if v != fmt.Sprintf("%0100d", i) {
			t.Fatalf("string %d changed after later adds: %q", i, v)
		}
	}
}

// TestCacheCompactsSlab: removing most of the cached one-shot jobs (and
// pruning their tombstones) makes the cache copy the rest to a new slab,
// so that what its chunks hold stays within twice the live bytes (plus
// slabSlack); the jobs left come back unchanged from Get, in order from
// Page, and the removed ones are gone. A job deleted and put again is
// live once.
func TestCacheCompactsSlab(t *testing.T) {
	const n = 40_000
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jc := New(func() time.Time { return at })
	jobs := laterJobs(n)
	for i, j := range jobs {
		jc.Put(j, uint64(i+1))
	}
	written := jc.slab.used
	if written < 2*slabSlack {
		t.Fatalf("%d jobs wrote %d bytes to the slab; the test needs more than %d", n, written, 2*slabSlack)
	}
	// Readers go on while the removals compact the slab (run with -race).
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := r; ; i = (i + 7) % n {
				select {
				case <-stop:
					return
				default:
				}
				if got, _, ok := jc.Get(jobs[i].ID); ok && got.Name != jobs[i].Name {
					t.Errorf("Get(%s) during the compaction: name %q, want %q", jobs[i].ID, got.Name, jobs[i].Name)
					return
				}
				jc.Page(jobs[i].ID, 3, func(*protocol.Job) bool { return true })
			}
		}()
	}
	rev := uint64(n + 1)
	for i, j := range jobs {
		if i%10 != 0 {
			jc.Remove(j.ID, rev)
			rev++
		}
	}
	jc.PruneTombstones(at.Add(time.Second), at.Add(time.Second))
	close(stop)
	readers.Wait()
	if jc.slab.wasteful() {
		t.Fatalf("slab used %d for %d live bytes: not compacted", jc.slab.used, jc.slab.live)
	}
	if jc.slab.used >= written/2 {
		t.Fatalf("slab used %d after removing 90%% of %d bytes: not compacted", jc.slab.used, written)
	}
	var want []string
	for i, j := range jobs {
		got, _, ok := jc.Get(j.ID)
		if i%10 != 0 {
			if ok || jc.Known(j.ID, 0) {
				t.Fatalf("removed job %s still known", j.ID)
			}
			continue
		}
		want = append(want, j.ID)
		if !ok {
			t.Fatalf("job %s lost by the compaction", j.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(j) {
			t.Fatalf("job %s after the compaction:\n got %+v\nwant %+v", j.ID, got, j)
		}
	}
	var page []string
	for _, j := range jc.Page("", n, func(*protocol.Job) bool { return true }) {
		page = append(page, j.ID)
	}
	slices.Sort(want)
	if !slices.Equal(page, want) {
		t.Fatalf("Page after the compaction: %d ids (first difference at %d), want %d", len(page), firstDiff(page, want), len(want))
	}

	// A tombstone revived by a newer put.
	j := jobs[1]
	jc.Put(j, rev)
	jc.Remove(j.ID, rev+1)
	jc.Put(j, rev+2)
	count := 0
	for _, p := range jc.Page("", n, func(p *protocol.Job) bool { return p.ID == j.ID }) {
		if p.ID == j.ID {
			count++
		}
	}
	if got, _, ok := jc.Get(j.ID); !ok || count != 1 || got.Name != j.Name {
		t.Fatalf("revived job: Get ok %v, name %q, in Page %d times; want true, %q, once", ok, got.Name, count, j.Name)
	}
	runtime.KeepAlive(jc)
}

// BenchmarkJobCacheSpans puts 100,000 delayed one-shot jobs into a cache
// among short-lived objects of the same sizes (as a burst of creates puts
// them among the embedded server's Msg-Id entries), drops those, and
// reports the heap the cache keeps: live bytes per job (HeapAlloc) and
// the bytes of spans in use per job (HeapInuse), which also counts the
// free slots its objects keep from being returned.
func BenchmarkJobCacheSpans(b *testing.B) {
	jobs := laterJobs(100_000)
	var live, inuse float64
	for b.Loop() {
		live, inuse = heldBytes(jobs, false, 4)
	}
	b.ReportMetric(live, "live-bytes/job")
	b.ReportMetric(inuse, "inuse-bytes/job")
}

// BenchmarkJobCacheCompact is the time a compaction holds the cache's
// write lock with 100,000 live one-shot jobs: every id and compact form
// copied, the map and the ordered ids rebuilt.
func BenchmarkJobCacheCompact(b *testing.B) {
	const n = 100_000
	jc := New(nil)
	for i, j := range laterJobs(n) {
		jc.Put(j, uint64(i+1))
	}
	for b.Loop() {
		jc.wmu.Lock()
		jc.mu.Lock()
		jc.slab.used = 3*jc.slab.live + slabSlack // wasteful
		jc.mu.Unlock()
		jc.compactIfWasteful()
		jc.wmu.Unlock()
	}
	if jc.Len() != n || jc.slab.wasteful() {
		b.Fatalf("after compacting: %d entries, wasteful %v", jc.Len(), jc.slab.wasteful())
	}
}
