package agent

import (
	"math/rand/v2"
	"time"
)

// maxRetryBackoff caps the wait between registration retries (and the
// spread of heartbeats after failures).
const maxRetryBackoff = 30 * time.Second

// fullJitter is the wait before retry n (1 for the first) of an attempt
// that failed: a uniformly random time in [0, min(limit, base·2^(n-1))]
// ("full jitter"), so that many agents failing at the same moment (a
// controller restart) do not retry in step.
func fullJitter(n int, base, limit time.Duration, rnd func(int64) int64) time.Duration {
	if base <= 0 {
		return 0
	}
	d := limit
	if n < 1 {
		n = 1
	}
	if n <= 32 && base<<(n-1) > 0 && base<<(n-1) < limit {
		d = base << (n - 1)
	}
	return time.Duration(rnd(int64(d) + 1))
}

// randInt64N is math/rand/v2's Int64N, the random source of fullJitter.
func randInt64N(n int64) int64 { return rand.Int64N(n) }
