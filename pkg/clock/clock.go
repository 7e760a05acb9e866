package clock

import (
	"context"
	"sync"
	"time"
)

// Clock reads time and makes timers.
type Clock interface {
	// Now returns the current time (with a monotonic reading for Real).
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or was stopped.
	Stop() bool
	// Reset re-arms the timer to fire after d.
	Reset(d time.Duration) bool
}

// Sleep waits d on c; false when ctx ended first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a clock that moves only with Advance or Set. Timers fire (in
// deadline order) when the clock passes their deadline. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, timers: map[*fakeTimer]struct{}{}}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires due timers.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.fireLocked()
	f.mu.Unlock()
}

// Set moves the clock to t (backwards too: a wall-clock jump) and fires due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.fireLocked()
	f.mu.Unlock()
}

// Timers returns how many timers are armed; tests poll it to know that a
// goroutine is waiting before they advance.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

func (f *Fake) fireLocked() {
	for t := range f.timers {
		if !t.deadline.After(f.now) {
			delete(f.timers, t)
			select {
			case t.c <- f.now:
			default:
			}
		}
	}
}

// NewTimer returns a fake timer firing when the clock reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), deadline: f.now.Add(d)}
	f.timers[t] = struct{}{}
	f.fireLocked()
	return t
}

type fakeTimer struct {
	f        *Fake
	c        chan time.Time
	deadline time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, ok := t.f.timers[t]
	delete(t.f.timers, t)
	return ok
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, ok := t.f.timers[t]
	t.deadline = t.f.now.Add(d)
	t.f.timers[t] = struct{}{}
	t.f.fireLocked()
	return ok
}
