package cli

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/pkg/clock"
)

// memTrimEvery is how often the trimmer looks at the heap.
const memTrimEvery = 15 * time.Second

// memTrimSlack is the least growth of the heap's waste (memory held from
// the OS beyond the live heap) since the last trim that makes a trim worth
// its collection.
const memTrimSlack = 64 << 20

// memSample is what the trimmer reads of the runtime (runtime/metrics).
type memSample struct {
	allocs   uint64 // bytes allocated since the process started
	live     uint64 // the heap live at the end of the last collection
	retained uint64 // memory the runtime holds from the OS
}

// waste is the memory held beyond the live heap: garbage not collected
// yet, free spans not returned, and the spans live objects keep sparse.
func (s memSample) waste() uint64 { return s.retained - min(s.live, s.retained) }

// memTrim returns to the OS, once the controller is quiet again, what a
// burst of work left held: after 300,000 jobs created in a minute the
// process holds about twice its live heap (the collector lets the heap grow
// to twice what the last collection kept) and the server's block buffers
// in its pools, and Go gives them back over minutes (a forced collection
// every 2 minutes, the scavenger keeping up to the heap goal): RSS stayed
// at 1.2–1.4 GiB for two minutes after the creates. The trimmer frees
// memory (freeMemory) when, within one look, the process allocated little
// (less than 1/16 of what it holds: the burst is over) and its waste grew
// by a quarter and memTrimSlack since the last trim. A trim costs two
// collections of the live heap; busy, the collector's own pacing is left
// alone, and waste that a trim cannot return (sparse spans) does not make
// it trim again.
//
// It also trims at the first quiet look past each of settle (the same
// test: less than 1/16 of what it holds allocated since the look before),
// whatever else it reads:
// the start reads every live job and execution through the embedded
// server, which keeps each block it read cached for 10 s after its last use
// (its buffer then goes to the server's pools, which the collector only
// empties) and the block's subject index for 2 minutes, and a controller
// quiet after its start allocates too little for the collector to run
// before its 2-minute forced collection. With 300,000 pending one-shots,
// RSS 30 s after ready was 341–369 MiB without these trims and 294–299
// MiB with them (bench/JOURNAL.md, stop 43). A controller busy by then (a
// restart under load, a benchmark) is left alone until it is quiet: its
// collector runs anyway, and a trim would cost it two collections and a
// heap grown again (0.3 s of the controller's CPU in a 12 s profile of the
// dispatch benchmark, stop 46).
//
// FreeOSMemory is process-wide, so it lives here, in the command, not in
// the controller package a program may embed.
type memTrim struct {
	clk  clock.Clock
	read func() memSample
	free func()
	// settle are the times after run began past which the trimmer trims
	// once each, whatever it reads (in order).
	settle []time.Duration
	// trims counts the trims done (tests).
	trims atomic.Int64
}

// serverCacheExpiry and serverSubjectStateExpiry are how long the embedded
// nats-server keeps a block's messages and its subject index after their
// last use (fixed in nats-server 2.15: defaultCacheBufferExpiration,
// defaultFssExpiration); memTrimSettleMargin is added to each.
const (
	serverCacheExpiry        = 10 * time.Second
	serverSubjectStateExpiry = 2 * time.Minute
	memTrimSettleMargin      = 2 * time.Second
)

func newMemTrim(clk clock.Clock) *memTrim {
	return &memTrim{clk: clk, read: readMemSample, free: freeMemory,
		settle: []time.Duration{serverCacheExpiry + memTrimSettleMargin, serverSubjectStateExpiry + memTrimSettleMargin}}
}

// freeMemory collects twice and returns the free memory to the OS. The
// embedded server puts an expired block's buffer (up to 8 MiB) in a
// sync.Pool, and the collector frees what a pool holds at its second
// collection after the put; debug.FreeOSMemory makes the second.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// run looks every memTrimEvery until ctx ends.
func (m *memTrim) run(ctx context.Context) {
	start := m.clk.Now()
	settle := m.settle
	prev := m.read()
	floor := prev.waste() // the waste at the last trim
	due := false          // a settle time passed, not trimmed for yet
	for clock.Sleep(ctx, m.clk, memTrimEvery) {
		cur := m.read()
		for len(settle) > 0 && m.clk.Now().Sub(start) >= settle[0] {
			due, settle = true, settle[1:]
		}
		if due && quiet(prev, cur) || shouldTrim(prev, cur, floor) {
			due = false
			m.free()
			m.trims.Add(1)
			cur = m.read()
			floor = cur.waste()
		}
		prev = cur
	}
}

// shouldTrim says whether to trim at cur, prev being the look before and
// floor the waste the last trim left.
func shouldTrim(prev, cur memSample, floor uint64) bool {
	grown := cur.waste() > floor+max(floor/4, memTrimSlack)
	return quiet(prev, cur) && grown
}

// quiet says whether the process allocated little between prev and cur:
// less than 1/16 of the memory it holds.
func quiet(prev, cur memSample) bool { return cur.allocs-prev.allocs < cur.retained/16 }

var memMetrics = []string{"/gc/heap/allocs:bytes", "/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes"}

// readMemSample reads the runtime's metrics.
func readMemSample() memSample {
	s := make([]metrics.Sample, len(memMetrics))
	for i, n := range memMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	total, released := v(2), v(3)
	return memSample{allocs: v(0), live: v(1), retained: total - min(released, total)}
}
