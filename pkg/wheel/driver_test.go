package wheel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type job struct {
	id       int
	deadline time.Time
}

type firing struct {
	job
	at time.Time // clock reading when fired
}

// harness runs a Driver on a fake clock and records what fires.
type harness struct {
	t    *testing.T
	clk  *fakeClock
	d    *Driver[job]
	mu   sync.Mutex
	got  []firing
	left chan []job
	stop context.CancelFunc
}

func startDriver(t *testing.T, clk *fakeClock, onFire func(h *harness, j job)) *harness {
	t.Helper()
	h := &harness{t: t, clk: clk, left: make(chan []job, 1)}
	d, err := NewDriver(DefaultConfig(), Clock(clk), func(j job) {
		h.mu.Lock()
		h.got = append(h.got, firing{j, clk.Now()})
		h.mu.Unlock()
		if onFire != nil {
			onFire(h, j)
		}
	})
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	h.d = d
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.left <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-h.left
	})
	return h
}

func (h *harness) add(id int, after time.Duration) Handle {
	dl := h.clk.Now().Add(after)
	return h.d.Add(dl, job{id, dl})
}

func (h *harness) fired() []firing {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// quiet reports whether Run is asleep on the timer it planned last (or on
// no timer, for an empty wheel), so nothing happens until the clock moves.
func (h *harness) quiet() bool {
	h.d.mu.Lock()
	armed := h.d.armed
	start := h.d.w.start
	h.d.mu.Unlock()
	at := h.clk.pendingAt()
	switch armed {
	case math.MinInt64:
		return false
	case math.MaxInt64:
		return len(at) == 0
	}
	return len(at) == 1 && at[0].Equal(start.Add(time.Duration(armed)))
}

func (h *harness) settle() {
	h.t.Helper()
	waitFor(h.t, "the driver to go back to sleep", h.quiet)
}

func (h *harness) checkNeverEarly() {
	for _, f := range h.fired() {
		if f.at.Before(f.deadline) {
			h.t.Fatalf("job %d fired %v early", f.id, f.deadline.Sub(f.at))
		}
	}
}

func TestDriverFiresOnTime(t *testing.T) {
	cases := []struct {
		name  string
		after time.Duration
		wake  time.Duration // when the driver's timer must fire
	}{
		{"now", 0, 0},
		{"finest level", 55 * time.Millisecond, 60 * time.Millisecond},
		{"slot boundary", 60 * time.Millisecond, 70 * time.Millisecond},
		{"second level", 90*time.Second + 5*time.Millisecond, 90*time.Second + 10*time.Millisecond},
		{"overflow", 2*time.Hour + 250*time.Millisecond, 2*time.Hour + 10*time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			h := startDriver(t, clk, nil)
			start := clk.Now()
			h.add(1, tc.after)
			if tc.after == 0 {
				waitFor(t, "the due job to fire", func() bool { return len(h.fired()) == 1 })
				h.checkNeverEarly()
				return
			}
			h.settle()
			if at := clk.pendingAt(); !at[0].Equal(start.Add(tc.wake)) {
				t.Fatalf("timer set for +%v, want +%v", at[0].Sub(start), tc.wake)
			}
			// Walk the clock up to 1 ns before the deadline: nothing fires.
			clk.Add(tc.after - 1)
			h.settle()
			if n := len(h.fired()); n != 0 {
				t.Fatalf("%d fired before the deadline", n)
			}
			// Then to the deadline's slot end.
			for len(h.fired()) == 0 {
				next := clk.pendingAt()
				if len(next) != 1 {
					t.Fatalf("pending timers %v", next)
				}
				clk.Add(next[0].Sub(clk.Now()))
				waitFor(t, "the driver to react", func() bool { return h.quiet() || len(h.fired()) == 1 })
			}
			h.checkNeverEarly()
			if late := h.fired()[0].at.Sub(h.fired()[0].deadline); late > 10*time.Millisecond {
				t.Fatalf("fired %v late, more than one tick", late)
			}
		})
	}
}

// TestDriverNeverEarlyWithEarlyTimers gives the driver timers that fire
// at once; it must re-plan rather than fire early.
func TestDriverNeverEarlyWithEarlyTimers(t *testing.T) {
	clk := newFakeClock()
	clk.early = 5
	h := startDriver(t, clk, nil)
	h.add(1, 30*time.Millisecond)
	h.add(2, 50*time.Millisecond)
	h.settle()
	if n := len(clk.createdTimers()); n < 6 {
		t.Fatalf("%d timers created, want the 5 early ones and a real one", n)
	}
	if n := len(h.fired()); n != 0 {
		t.Fatalf("%d jobs fired on early timers", n)
	}
	clk.Add(60 * time.Millisecond)
	waitFor(t, "both jobs", func() bool { return len(h.fired()) == 2 })
	h.checkNeverEarly()
}

// TestDriverNoTickingWhenIdle checks that an empty wheel sets no timer and
// a sparse one sets one timer for its next slot, not a periodic tick.
func TestDriverNoTickingWhenIdle(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		clk := newFakeClock()
		h := startDriver(t, clk, nil)
		h.settle()
		clk.Add(10 * time.Hour)
		h.d.mu.Lock()
		parks := h.d.parks
		h.d.mu.Unlock()
		if parks != 1 || len(clk.createdTimers()) != 0 {
			t.Fatalf("parks=%d timers=%v, want 1 sleep and no timer", parks, clk.createdTimers())
		}
	})
	t.Run("sparse", func(t *testing.T) {
		clk := newFakeClock()
		h := startDriver(t, clk, nil)
		h.add(1, time.Hour)
		h.settle()
		for i := 0; i < 59; i++ {
			clk.Add(time.Minute)
			if !h.quiet() {
				t.Fatalf("driver woke at minute %d", i+1)
			}
		}
		if c := clk.createdTimers(); len(c) != 1 || c[0] != time.Hour+10*time.Millisecond {
			t.Fatalf("timers %v, want one of 1h10ms", c)
		}
		clk.Add(time.Minute + 10*time.Millisecond)
		waitFor(t, "the job", func() bool { return len(h.fired()) == 1 })
		h.checkNeverEarly()
	})
}

// TestDriverAddEarlierWakes checks that an Add due before the planned
// wake-up re-plans the sleep, and a later one does not.
func TestDriverAddEarlierWakes(t *testing.T) {
	clk := newFakeClock()
	h := startDriver(t, clk, nil)
	h.add(1, time.Hour)
	h.settle()
	h.add(2, 20*time.Millisecond)
	waitFor(t, "a 30 ms timer", func() bool {
		c := clk.createdTimers()
		return h.quiet() && c[len(c)-1] == 30*time.Millisecond
	})
	before := len(clk.createdTimers())
	h.add(3, 45*time.Minute)
	h.d.mu.Lock()
	armed := h.d.armed
	h.d.mu.Unlock()
	if armed != int64(30*time.Millisecond) || !h.quiet() || len(clk.createdTimers()) != before {
		t.Fatalf("a later Add re-planned: armed +%v", time.Duration(armed))
	}
	clk.Add(30 * time.Millisecond)
	waitFor(t, "job 2", func() bool { return len(h.fired()) == 1 })
	if f := h.fired(); f[0].id != 2 {
		t.Fatalf("fired %v, want job 2", f)
	}
	h.checkNeverEarly()
}

func TestDriverStopReturnsPending(t *testing.T) {
	cases := []struct {
		name string
		stop func(h *harness)
	}{
		{"Stop", func(h *harness) { h.d.Stop(); h.d.Stop() }},
		{"context", func(h *harness) { h.stop() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			h := startDriver(t, clk, nil)
			h.add(1, 0)
			h.add(2, 5*time.Second)
			h.add(3, time.Hour)
			cancelled := h.add(4, 2*time.Hour)
			h.add(5, 3*time.Hour)
			h.d.Cancel(cancelled)
			waitFor(t, "job 1", func() bool { return len(h.fired()) == 1 })
			tc.stop(h)
			left := <-h.left
			var ids []int
			for _, j := range left {
				ids = append(ids, j.id)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []int{2, 3, 5}) {
				t.Fatalf("Run returned %v, want [2 3 5]", ids)
			}
			if h.d.Len() != 0 {
				t.Fatalf("Len = %d after Run returned", h.d.Len())
			}
			// Items added afterwards are kept for the next Run.
			h.add(6, time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			if tc.name == "context" {
				cancel()
			}
			h.d.Stop()
			again := h.d.Run(ctx)
			cancel()
			if len(again) != 1 || again[0].id != 6 {
				t.Fatalf("second Run returned %v, want job 6", again)
			}
			h.left <- nil // for the cleanup
		})
	}
}

// TestDriverConcurrentAddCancel adds and cancels from several goroutines
// while the clock runs: every job either fires once, never early, or was
// cancelled.
func TestDriverConcurrentAddCancel(t *testing.T) {
	clk := newFakeClock()
	h := startDriver(t, clk, nil)
	const workers, per = 4, 500
	var mu sync.Mutex
	cancelled := map[int]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < per; i++ {
				id := w*per + i
				hd := h.add(id, time.Duration(rng.Int64N(int64(200*time.Millisecond))))
				if i%3 == 0 && h.d.Cancel(hd) {
					mu.Lock()
					cancelled[id] = true
					mu.Unlock()
				}
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			clk.Add(time.Millisecond)
		}
	}
	clk.Add(time.Second)
	waitFor(t, "all jobs", func() bool { return len(h.fired())+len(cancelled) == workers*per })
	seen := map[int]bool{}
	for _, f := range h.fired() {
		if seen[f.id] || cancelled[f.id] {
			t.Fatalf("job %d fired twice or after a successful Cancel", f.id)
		}
		seen[f.id] = true
	}
	h.checkNeverEarly()
}

// TestDriverFireMayCallBack re-adds and cancels from inside fire.
func TestDriverFireMayCallBack(t *testing.T) {
	clk := newFakeClock()
	var victim Handle
	h := startDriver(t, clk, func(h *harness, j job) {
		if j.id < 5 {
			h.add(j.id+1, 10*time.Millisecond)
		}
		h.d.Cancel(victim)
	})
	victim = h.add(100, time.Hour)
	h.add(0, 0)
	for len(h.fired()) < 6 {
		waitFor(t, "the chain to progress", func() bool { return h.quiet() || len(h.fired()) == 6 })
		if at := clk.pendingAt(); len(at) == 1 {
			clk.Add(at[0].Sub(clk.Now()))
		}
	}
	if h.d.Len() != 0 {
		t.Fatalf("Len = %d, want 0 (victim cancelled)", h.d.Len())
	}
	h.checkNeverEarly()
}

func TestDriverRunTwicePanics(t *testing.T) {
	clk := newFakeClock()
	h := startDriver(t, clk, nil)
	h.settle()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "already running") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	h.d.Run(context.Background())
}

func TestNewDriverErrors(t *testing.T) {
	fire := func(int) {}
	cases := []struct {
		name  string
		cfg   Config
		clk   Clock
		fire  func(int)
		field string
	}{
		{"nil clock", DefaultConfig(), nil, fire, "clk"},
		{"nil fire", DefaultConfig(), SystemClock(), nil, "fire"},
		{"bad config", Config{Levels: []Level{{Tick: 0, Slots: 3}}}, SystemClock(), fire, "Levels[0].Tick"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDriver(tc.cfg, tc.clk, tc.fire)
			if d != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("NewDriver = %v, %v; want ErrConfig naming %s", d, err, tc.field)
			}
		})
	}
}

// TestDriverSystemClock runs on the real monotonic clock and checks that
// nothing fires before its deadline.
func TestDriverSystemClock(t *testing.T) {
	type stamp struct{ deadline, fired time.Time }
	var mu sync.Mutex
	var got []stamp
	d, err := NewDriver(FineConfig(), SystemClock(), func(dl time.Time) {
		now := time.Now()
		mu.Lock()
		got = append(got, stamp{dl, now})
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan []time.Time, 1)
	go func() { left <- d.Run(ctx) }()
	const n = 50
	for i := 0; i < n; i++ {
		dl := time.Now().Add(time.Duration(i) * time.Millisecond)
		d.Add(dl, dl)
	}
	waitFor(t, "all jobs", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
	cancel()
	if l := <-left; len(l) != 0 {
		t.Fatalf("%d left over", len(l))
	}
	for _, s := range got {
		if s.fired.Before(s.deadline) {
			t.Fatalf("fired %v early", s.deadline.Sub(s.fired))
		}
	}
}
