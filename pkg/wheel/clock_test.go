package wheel

import (
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
)

// fakeClock is a manual Clock: time moves only when the test calls Add,
// which fires the timers that are due.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	created []time.Duration // durations of every NewTimer call
	early   int             // this many next timers fire at once, early
}

type fakeTimer struct {
	c   chan time.Time
	at  time.Time
	clk *fakeClock
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: make(chan time.Time, 1), at: c.now.Add(d), clk: c}
	c.created = append(c.created, d)
	if d <= 0 || c.early > 0 {
		if c.early > 0 {
			c.early--
		}
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Add moves the clock forward by d and fires the timers now due.
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.c <- c.now
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *fakeClock) pendingAt() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.timers {
		out = append(out, t.at)
	}
	return out
}

func (c *fakeClock) createdTimers() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.created...)
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Reset re-arms the timer to fire d after the fake now (the Driver does
// not call it; it is here to satisfy clock.Timer).
func (t *fakeTimer) Reset(d time.Duration) bool {
	active := t.Stop()
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	t.at = c.now.Add(d)
	c.timers = append(c.timers, t)
	return active
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

func TestSystemClock(t *testing.T) {
	c := SystemClock()
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("Now went backwards: %v < %v", now, before)
	}
	tm := c.NewTimer(time.Millisecond)
	fired := <-tm.C()
	if fired.Sub(before) < time.Millisecond {
		t.Fatalf("timer fired after %v, before its 1 ms", fired.Sub(before))
	}
	if tm.Stop() {
		t.Fatal("Stop of an expired timer returned true")
	}
	if !c.NewTimer(time.Hour).Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
}
