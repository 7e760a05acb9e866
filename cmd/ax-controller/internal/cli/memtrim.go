package cli

import (
	"context"
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
// at 1.2–1.4 GiB for two minutes after the creates. The trimmer forces a
// collection and returns the free memory (debug.FreeOSMemory) when, within
// one look, the process allocated little (less than 1/16 of what it
// holds: the burst is over) and its waste grew by a quarter and
// memTrimSlack since the last trim. A trim costs one collection of the
// live heap; busy, the collector's own pacing is left alone, and waste
// that a trim cannot return (sparse spans) does not make it trim again.
// FreeOSMemory is process-wide, so it lives here, in the command, not in
// the controller package a program may embed.
type memTrim struct {
	clk  clock.Clock
	read func() memSample
	free func()
	// trims counts the trims done (tests).
	trims atomic.Int64
}

func newMemTrim(clk clock.Clock) *memTrim {
	return &memTrim{clk: clk, read: readMemSample, free: debug.FreeOSMemory}
}

// run looks every memTrimEvery until ctx ends.
func (m *memTrim) run(ctx context.Context) {
	prev := m.read()
	floor := prev.waste() // the waste at the last trim
	for clock.Sleep(ctx, m.clk, memTrimEvery) {
		cur := m.read()
		if shouldTrim(prev, cur, floor) {
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
	quiet := cur.allocs-prev.allocs < cur.retained/16
	grown := cur.waste() > floor+max(floor/4, memTrimSlack)
	return quiet && grown
}

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
