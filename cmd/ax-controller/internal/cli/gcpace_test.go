package cli

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
)

// TestGCPercent: Go's default up to gcHeadroom of live heap, then the
// percent that lets the heap grow by gcHeadroom, never under gcMinPercent.
func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{40 * mib, 100},
		{96 * mib, 100},
		{120 * mib, 80},
		{150 * mib, 64},
		{192 * mib, 50},
		{200 * mib, 50},
		{4096 * mib, 50},
	} {
		if got := gcPercent(tc.live); got != tc.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}

// TestGCPaceRun: the pacer sets the percent at once and each time the
// live heap it reads asks for another, on its clock, and sets Go's
// default back when it stops.
func TestGCPaceRun(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var mu sync.Mutex
	live := uint64(200 * mib)
	var sets []int
	g := &gcPace{clk: clk,
		live: func() uint64 { mu.Lock(); defer mu.Unlock(); return live },
		set:  func(p int) int { mu.Lock(); defer mu.Unlock(); sets = append(sets, p); return 0 }}
	got := func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), sets...) }
	setLive := func(v uint64) { mu.Lock(); defer mu.Unlock(); live = v }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	look := func() {
		testutil.Eventually(t, 10*time.Second, "the pacer waiting", func() bool { return clk.Timers() > 0 })
		clk.Advance(gcPaceEvery)
	}
	testutil.Eventually(t, 10*time.Second, "the first percent", func() bool { return len(got()) == 1 })
	look() // same live heap: nothing set
	setLive(150 * mib)
	look()
	testutil.Eventually(t, 10*time.Second, "the second percent", func() bool { return len(got()) == 2 })
	setLive(10 * mib)
	look()
	testutil.Eventually(t, 10*time.Second, "the default again", func() bool { return len(got()) == 3 })
	setLive(300 * mib)
	look()
	testutil.Eventually(t, 10*time.Second, "the floor", func() bool { return len(got()) == 4 })
	cancel()
	<-done
	if s, want := got(), []int{50, 64, 100, 50, 100}; !slices.Equal(s, want) {
		t.Fatalf("percents set %v, want %v", s, want)
	}
}

// TestGCPaceOn: an operator's GOGC switches the pacer off.
func TestGCPaceOn(t *testing.T) {
	t.Setenv("GOGC", "200")
	if gcPaceOn() {
		t.Error("gcPaceOn with GOGC=200 set")
	}
	t.Setenv("GOGC", "off")
	if gcPaceOn() {
		t.Error("gcPaceOn with GOGC=off set")
	}
	t.Setenv("GOGC", "")
	if !gcPaceOn() {
		t.Error("not gcPaceOn with GOGC set empty")
	}
	if err := os.Unsetenv("GOGC"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	if !gcPaceOn() {
		t.Error("not gcPaceOn with GOGC unset")
	}
}
