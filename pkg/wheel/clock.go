package wheel

import "time"

// Clock is the Driver's source of time. Times it returns must carry a
// monotonic reading (as time.Now's do) for the Driver to be immune to
// wall-clock jumps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer whose channel receives once, no earlier
	// than d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel that receives when the timer expires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock returns the Clock of the running process, based on time.Now
// and time.Timer.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }
