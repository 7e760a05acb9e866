// Package admission bounds what one agent may ask of the controller
// before its request takes a place in a queue or a worker: at most a few
// of its requests waiting at a time, and at most a burst of them, then
// one every interval (a token bucket per agent).
//
// It owns one choice: what the controller does with an agent that sends
// more than any agent does. ax-agent registers once per connection,
// heartbeats once per interval and makes its command consumer once per
// registration, each after the reply to the one before, so the bounds
// never touch it; they stop one device, or a stolen key, that publishes
// requests as fast as it can from holding up the other agents' requests
// or from exhausting what they share (the registration queue, the
// heartbeat workers, AX_CMD's consumers).
//
// Worked example: Bounds{Waiting: 2, Burst: 5, Every: time.Second}. An
// agent that sends 100 requests at once gets 2 admitted (Waiting), the
// others refused with a wait; once those two leave the queue (Release),
// three more are admitted (the burst's 5 tokens), then one a second.
//
// Costs: one map entry per agent seen lately (swept once the map doubles:
// agents back at their full allowance are removed); Admit, Release and
// Forget are O(1) under one mutex, held for a map operation only. The
// clock is the caller's: every method takes now (use a monotonic clock).
// Concurrency: safe for use by many goroutines.
package admission
