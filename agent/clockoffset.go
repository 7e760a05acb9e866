package agent

import (
	"sync"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// offsetSamples is how many request/reply exchanges offsetFilter keeps.
// At the default heartbeat (5 s) that is the last 40 s.
const offsetSamples = 8

// offsetFilter estimates the controller's clock minus the agent's from the
// last few request/reply exchanges (registration, heartbeats), the way NTP
// filters its samples: one exchange is off by at most half its round trip,
// so the estimate is the offset of the kept sample with the shortest round
// trip. A single slow reply (a loaded controller, a congested link) then
// no longer moves the offset by half its delay; the estimate follows a
// real clock step within offsetSamples exchanges.
//
// Safe for concurrent use; reset starts over (a new registration may be
// answered by another controller replica with its own clock).
type offsetFilter struct {
	mu      sync.Mutex
	samples [offsetSamples]offsetSample
	n, next int
}

type offsetSample struct {
	offset, rtt time.Duration
}

// add records the exchange sent at t0 and answered at t2 (agent clock)
// with controller time t1, and returns the current estimate.
func (f *offsetFilter) add(t0, t1, t2 time.Time) time.Duration {
	s := offsetSample{offset: protocol.ClockOffset(t0, t1, t2), rtt: max(t2.Sub(t0), 0)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.samples[f.next] = s
	f.next = (f.next + 1) % offsetSamples
	f.n = min(f.n+1, offsetSamples)
	best := f.samples[0]
	for _, c := range f.samples[1:f.n] {
		if c.rtt < best.rtt {
			best = c
		}
	}
	return best.offset
}

// reset forgets every sample.
func (f *offsetFilter) reset() {
	f.mu.Lock()
	f.n, f.next = 0, 0
	f.mu.Unlock()
}
