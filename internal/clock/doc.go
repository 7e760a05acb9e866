// Package clock is the time source of the agent and the controller, so that
// tests can move time by hand instead of sleeping. Real reads the system
// clock; Fake moves only when told.
package clock
