package wheel

import "github.com/axsched/ax/pkg/clock"

// Clock is the Driver's source of time: ax's one clock interface
// (pkg/clock). Times it returns must carry a monotonic reading (as
// time.Now's do) for the Driver to be immune to wall-clock jumps; timers
// must fire no earlier than asked.
type Clock = clock.Clock

// Timer is a one-shot timer made by a Clock.
type Timer = clock.Timer

// SystemClock returns the Clock of the running process, based on time.Now
// and time.Timer.
func SystemClock() Clock { return clock.Real{} }
