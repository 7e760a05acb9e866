package cli

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
)

const mib = 1 << 20

// TestShouldTrim: a trim when the process went quiet (little allocated
// since the last look) and its waste grew by a quarter and memTrimSlack
// since the last trim; not while it allocates, not for waste a trim left.
func TestShouldTrim(t *testing.T) {
	prev := memSample{allocs: 10_000 * mib}
	for _, tc := range []struct {
		name  string
		cur   memSample
		floor uint64
		want  bool
	}{
		{"after a burst", memSample{allocs: prev.allocs + 20*mib, live: 500 * mib, retained: 1200 * mib}, 100 * mib, true},
		{"busy", memSample{allocs: prev.allocs + 200*mib, live: 500 * mib, retained: 1200 * mib}, 100 * mib, false},
		{"waste the last trim left", memSample{allocs: prev.allocs + 1*mib, live: 200 * mib, retained: 400 * mib}, 200 * mib, false},
		{"grown less than the slack", memSample{allocs: prev.allocs + 1*mib, live: 200 * mib, retained: 460 * mib}, 200 * mib, false},
		{"grown past the slack", memSample{allocs: prev.allocs + 1*mib, live: 200 * mib, retained: 470 * mib}, 200 * mib, true},
		{"grown less than a quarter of a large floor", memSample{allocs: prev.allocs + 1*mib, live: 500 * mib, retained: 2700 * mib}, 2000 * mib, false},
		{"live over retained", memSample{allocs: prev.allocs, live: 900 * mib, retained: 800 * mib}, 0, false},
	} {
		if got := shouldTrim(prev, tc.cur, tc.floor); got != tc.want {
			t.Errorf("%s: shouldTrim = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMemTrimRun: the trimmer looks every memTrimEvery on its clock, trims
// once after a burst and not again for the waste the trim left.
func TestMemTrimRun(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var mu sync.Mutex
	cur := memSample{allocs: 1000 * mib, live: 100 * mib, retained: 150 * mib}
	set := func(s memSample) { mu.Lock(); cur = s; mu.Unlock() }
	m := &memTrim{clk: clk, read: func() memSample { mu.Lock(); defer mu.Unlock(); return cur }}
	m.free = func() { // what FreeOSMemory does: the garbage goes, sparse spans stay
		mu.Lock()
		cur.retained = cur.live + 120*mib
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	defer func() { cancel(); <-done }()
	look := func() { // one look, once run waits on its timer
		testutil.Eventually(t, 10*time.Second, "the trimmer waiting", func() bool { return clk.Timers() > 0 })
		clk.Advance(memTrimEvery)
	}
	// The burst (once the trimmer read the quiet process): much
	// allocated, the heap grown.
	testutil.Eventually(t, 10*time.Second, "the trimmer waiting", func() bool { return clk.Timers() > 0 })
	set(memSample{allocs: 5000 * mib, live: 500 * mib, retained: 1300 * mib})
	look()
	look() // quiet: no allocation since the look before
	testutil.Eventually(t, 10*time.Second, "one trim after the burst", func() bool { return m.trims.Load() == 1 })
	for range 3 {
		look()
	}
	testutil.Eventually(t, 10*time.Second, "the trimmer waiting", func() bool { return clk.Timers() > 0 })
	if n := m.trims.Load(); n != 1 {
		t.Fatalf("trims: %d, want 1 (the waste the trim left is no reason for another)", n)
	}
}

// TestMemTrimSettle: after the start the trimmer trims at the first quiet
// look past each settle time, though nothing else it reads calls for a
// trim, and then only when its reads do; busy at a settle time, it waits
// for the first quiet look.
func TestMemTrimSettle(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	steady := memSample{allocs: 1000 * mib, live: 100 * mib, retained: 150 * mib}
	m := &memTrim{clk: clk, read: func() memSample { return steady }, free: func() {},
		settle: newMemTrim(clk).settle}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	defer func() { cancel(); <-done }()
	// want is the trims done after each look, memTrimEvery apart: one at
	// the first look past the server's cache expiry (15 s), one at the
	// first past its subject state's (135 s), none after.
	want := []int64{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2}
	for i, w := range want {
		testutil.Eventually(t, 10*time.Second, "the trimmer waiting", func() bool { return clk.Timers() > 0 })
		clk.Advance(memTrimEvery)
		testutil.Eventually(t, 10*time.Second, "the look done", func() bool { return clk.Timers() > 0 })
		if n := m.trims.Load(); n != w {
			t.Fatalf("after look %d (%s): %d trims, want %d", i+1, time.Duration(i+1)*memTrimEvery, n, w)
		}
	}
}

// TestMemTrimSettleWaitsWhileBusy: a process that allocates a lot at every
// look (a controller under load after its start) is not trimmed at the
// settle times; the first quiet look after them trims once.
func TestMemTrimSettleWaitsWhileBusy(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var mu sync.Mutex
	cur := memSample{allocs: 1000 * mib, live: 100 * mib, retained: 150 * mib}
	busy := true
	m := &memTrim{clk: clk, free: func() {}, settle: newMemTrim(clk).settle}
	m.read = func() memSample {
		mu.Lock()
		defer mu.Unlock()
		if busy {
			cur.allocs += 100 * mib // two thirds of what it holds, every look
		}
		return cur
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	defer func() { cancel(); <-done }()
	look := func() {
		testutil.Eventually(t, 10*time.Second, "the trimmer waiting", func() bool { return clk.Timers() > 0 })
		clk.Advance(memTrimEvery)
		testutil.Eventually(t, 10*time.Second, "the look done", func() bool { return clk.Timers() > 0 })
	}
	for range 12 { // past both settle times (15 s and 135 s)
		look()
	}
	if n := m.trims.Load(); n != 0 {
		t.Fatalf("%d trims while busy, want none", n)
	}
	mu.Lock()
	busy = false
	mu.Unlock()
	look() // quiet: nothing allocated since the last busy look
	if n := m.trims.Load(); n != 1 {
		t.Fatalf("%d trims once quiet, want 1", n)
	}
	look()
	look()
	if n := m.trims.Load(); n != 1 {
		t.Fatalf("%d trims after, want still 1", n)
	}
}
