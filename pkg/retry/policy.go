package retry

import "time"

// Policy says how often and how long to wait before retrying a failed attempt.
// The delay before attempt n+1 (after attempt n failed) is Base·2^(n-1),
// capped at Max, plus a random jitter in [0, Jitter).
type Policy struct {
	// MaxAttempts is the total number of attempts, the first included.
	// 0 or 1 means no retry.
	MaxAttempts int
	// Base is the delay after the first failed attempt.
	Base time.Duration
	// Max caps the exponential part of the delay.
	Max time.Duration
	// Jitter is the upper bound (exclusive) of the random delay added.
	Jitter time.Duration
	// OnTimeout retries attempts that timed out. False by default: a timeout
	// is suspect (the handler may have had its effect) and is not retried blindly.
	OnTimeout bool
}
