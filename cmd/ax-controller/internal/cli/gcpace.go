package cli

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/axsched/ax/pkg/clock"
)

// Pacing of the Go collector (gcPace).
const (
	// gcHeadroom is how far the heap may grow beyond the live heap before
	// a collection, once the live heap is larger than it.
	gcHeadroom = 96 << 20
	// gcDefaultPercent is Go's default GOGC, the percent a small heap
	// keeps.
	gcDefaultPercent = 100
	// gcMinPercent is the least percent gcPace sets: below it the
	// collector's CPU grows faster than the memory it saves.
	gcMinPercent = 50
	// gcPaceEvery is how often gcPace reads the live heap.
	gcPaceEvery = time.Second
)

// gcPercent returns the collector's target percent (GOGC) for a live heap
// of live bytes: Go's default while the live heap is at most gcHeadroom,
// then the percent that lets the heap grow by gcHeadroom, and never less
// than gcMinPercent.
//
// Worked example: 300,000 pending one-shot jobs make a live heap of about
// 150 MiB once created, and about 200 MiB while they are being created.
// With GOGC=100 the heap grows to 300–400 MiB between collections; the
// jobs the burst's last collections kept are scattered over all the spans
// that heap used, and a span with one live object stays in use: the
// process that made them held 302–308 MiB six minutes later (the same
// jobs read back by a restart: 183–248 MiB). With the heap's growth
// capped at 96 MiB (percent 64 at 150 MiB live, 50 at 200 MiB) it held
// 282–294 MiB from two minutes after the creates on, its peak was 654–744
// MiB instead of 957, and the creates and restarts took no longer
// (bench/JOURNAL.md, stop 57). A controller whose live heap is under 96 MiB
// keeps Go's default.
func gcPercent(live uint64) int {
	if live <= gcHeadroom {
		return gcDefaultPercent
	}
	return max(int(uint64(gcHeadroom)*100/live), gcMinPercent)
}

// gcPace sets the collector's percent from the live heap (gcPercent), so
// that a large heap does not double between collections. It is off when
// the operator set GOGC (gcPaceOn): their choice stands. The percent is
// process-wide, so it lives here, in the command, not in the controller
// package a program may embed.
type gcPace struct {
	clk  clock.Clock
	live func() uint64
	set  func(percent int) int
}

// gcPaceOn reports whether the controller paces its collector: GOGC is
// not set in its environment (or set empty, which Go reads as unset).
func gcPaceOn() bool { return os.Getenv("GOGC") == "" }

func newGCPace(clk clock.Clock) *gcPace {
	return &gcPace{clk: clk, live: func() uint64 { return readMemSample().live }, set: debug.SetGCPercent}
}

// run reads the live heap every gcPaceEvery and sets the percent when it
// changes, until ctx ends; it then sets Go's default back.
func (g *gcPace) run(ctx context.Context) {
	cur := gcDefaultPercent
	defer func() {
		if cur != gcDefaultPercent {
			g.set(gcDefaultPercent)
		}
	}()
	for {
		if p := gcPercent(g.live()); p != cur {
			g.set(p)
			cur = p
		}
		if !clock.Sleep(ctx, g.clk, gcPaceEvery) {
			return
		}
	}
}
