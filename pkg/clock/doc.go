// Package clock is ax's one source of time: the timing wheel (pkg/wheel),
// the agent and the controller read time and make timers only through a
// Clock, so that tests move time by hand instead of sleeping. Real reads
// the system clock (times carry a monotonic reading); Fake moves only when
// told, and fires its timers in deadline order as it passes them.
//
// The package does no I/O and starts no goroutines; Fake is safe for
// concurrent use.
package clock
