package histindex

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// anonRSS returns the process's resident anonymous memory in bytes
// (RssAnon), or false where there is none to read.
func anonRSS(t *testing.T) (int64, bool) {
	t.Helper()
	r, err := testutil.ProcRSS(os.Getpid())
	if err != nil {
		return 0, false
	}
	kb, ok := r["RssAnon"]
	return int64(kb) << 10, ok
}

// TestReleaseMemoryFreesWriterCache: after batches that touch far more
// pages than the writer's 32 MiB page cache holds, ReleaseMemory gives
// back at least 24 MiB of the process's resident memory (the cache's
// pages, each in an 8 KiB slot of modernc's allocator), and the index
// still answers and applies.
func TestReleaseMemoryFreesWriterCache(t *testing.T) {
	if _, ok := anonRSS(t); !ok {
		t.Skip("no /proc/self/status RssAnon here")
	}
	ctx := context.Background()
	idx := openTestIndex(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	jobs := make([]string, 1000)
	for i := range jobs {
		jobs[i] = protocol.NewJobID("mem", t0, rng.Uint32())
	}
	seq := uint64(0)
	apply := func(batches int) {
		t.Helper()
		items := make([]Item, len(jobs))
		for range batches {
			for i := range items {
				seq++
				at := t0.Add(time.Duration(seq) * time.Second)
				items[i] = Item{Exec: &protocol.Execution{ExecID: protocol.ExecID(jobs[i], at), JobID: jobs[i], Attempt: 1,
					State: protocol.StateSuccess, Agent: "edge-" + strconv.Itoa(i%16), ScheduledAt: at, UpdatedAt: at}}
			}
			if err := idx.Apply(ctx, items, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(40)
	runtime.GC()
	before, _ := anonRSS(t)
	if err := idx.ReleaseMemory(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	after, _ := anonRSS(t)
	t.Logf("freed %d MiB (%d → %d MiB)", (before-after)>>20, before>>20, after>>20)
	if freed := before - after; freed < 24<<20 {
		t.Fatalf("ReleaseMemory freed %d MiB of resident memory (%d → %d MiB), want at least 24", freed>>20, before>>20, after>>20)
	}
	apply(1)
	if n, err := idx.Len(ctx); err != nil || n != int(seq) {
		t.Fatalf("after the release: Len %d, %v; want %d", n, err, seq)
	}
}
