package controller

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/clock"
)

// steppedClock is the real clock whose wall reading can be stepped (an NTP
// step, a VM resumed, an operator running `date -s`). Timers stay real.
type steppedClock struct{ off atomic.Int64 }

func (s *steppedClock) Now() time.Time                       { return time.Now().Round(0).Add(time.Duration(s.off.Load())) }
func (s *steppedClock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }
func (s *steppedClock) step(d time.Duration)                 { s.off.Add(int64(d)) }

// steppedFixture is a lease fixture whose controller wall clock can be
// stepped while lease durations run on the monotonic clock (time.Now).
func steppedFixture(t *testing.T) (*leaseFixture, *steppedClock) {
	clk := &steppedClock{}
	f := newLeaseFixtureWith(t, 3, func(cfg *Config) {
		cfg.Clock = clk
		cfg.monoNow = time.Now
		cfg.AgentOfflineAfter = 5 * time.Second
	})
	return f, clk
}

// TestGroupLeaseNotMovedByWallClockStep: a forward step of the owner's
// wall clock does not move a group lease its holder renewed a moment ago
// (the holder fires until its own lease ends, on its monotonic clock).
func TestGroupLeaseNotMovedByWallClockStep(t *testing.T) {
	f, clk := steppedFixture(t)
	holderEnd := f.renew(t)
	clk.step(f.cfg.LeaseTTL + 100*time.Millisecond)
	f.notMovedUntil(t, holderEnd, "a forward step of the controller's wall clock")
}

// TestGroupLeaseFailsOverAfterBackwardWallClockStep: after the owner's
// wall clock steps back an hour, a holder that goes silent still loses its
// lease within about a TTL, and the replica keeps its shards.
func TestGroupLeaseFailsOverAfterBackwardWallClockStep(t *testing.T) {
	f, clk := steppedFixture(t)
	f.renew(t)
	clk.step(-time.Hour) // h goes silent now; o keeps heartbeating
	eventually(t, 5*f.cfg.LeaseTTL+5*time.Second, "lease moved to "+f.o.id+" after the wall clock stepped back", func() bool {
		f.o.heartbeatClaims()
		for _, cmd := range f.o.commands() {
			if assignWithEpoch(f.job.ID, f.epoch)(cmd) {
				return true
			}
		}
		return false
	})
	if got := len(f.c.own.OwnedShards()); got != f.cfg.Shards {
		t.Fatalf("replica works %d shards after the step, want %d", got, f.cfg.Shards)
	}
}
