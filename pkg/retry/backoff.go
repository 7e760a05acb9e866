package retry

import (
	"fmt"
	"math"
	"time"
)

// Limits Validate enforces.
const (
	// MaxAttemptsLimit is the largest MaxAttempts Validate accepts.
	MaxAttemptsLimit = 1000
	// MaxDelayLimit is the largest Base, Max and Jitter Validate accepts.
	MaxDelayLimit = 7 * 24 * time.Hour
)

// DefaultPolicy is the policy of a job that says nothing about retries:
// MaxAttempts 1 (no retry), and, for a job that only raises MaxAttempts,
// Base 1s and Max 5m (delays 1s, 2s, 4s, ... 5m) without jitter.
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 1, Base: time.Second, Max: 5 * time.Minute}
}

// WithDefaults returns p with unset fields taken from DefaultPolicy:
// MaxAttempts 0 becomes 1, Base 0 becomes 1s, and Max 0 becomes the larger of
// 5m and Base. Jitter and OnTimeout are kept as they are.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.Base == 0 {
		p.Base = d.Base
	}
	if p.Max == 0 {
		p.Max = max(d.Max, p.Base)
	}
	return p
}

// Validate checks the policy. Errors are *FieldError wrapping
// ErrInvalidPolicy and name the field: "retry.max_attempts",
// "retry.base", "retry.max" or "retry.jitter". MaxAttempts 0 is valid and
// means 1 (no retry), as documented on Policy.
func (p Policy) Validate() error {
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxAttemptsLimit {
		return &FieldError{"retry.max_attempts", fmt.Sprintf("must be between 0 and %d (0 and 1 mean no retry), got %d", MaxAttemptsLimit, p.MaxAttempts)}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"retry.base", p.Base}, {"retry.max", p.Max}, {"retry.jitter", p.Jitter}} {
		if f.d < 0 || f.d > MaxDelayLimit {
			return &FieldError{f.name, fmt.Sprintf("must be between 0s and %s, got %s", MaxDelayLimit, f.d)}
		}
	}
	if p.Max < p.Base {
		return &FieldError{"retry.max", fmt.Sprintf("must be >= retry.base (%s), got %s", p.Base, p.Max)}
	}
	return nil
}

// Delay is the wait after attempt `attempt` (1-based) failed, before attempt
// attempt+1: Base·2^(attempt-1) capped at Max, plus a jitter rnd(Jitter)
// in [0, Jitter). rnd is a function like math/rand/v2.Int64N; it is only
// called when Jitter > 0, a nil rnd means no jitter, and a result outside
// [0, Jitter) is clamped into it.
//
// Delay never overflows and is never negative: for any attempt (values below
// 1 count as 1, math.MaxInt is fine) the result is in [0, Max+Jitter),
// saturating at math.MaxInt64. Negative fields, which Validate rejects,
// count as 0; with Max < Base the cap still wins.
func (p Policy) Delay(attempt int, rnd func(n int64) int64) time.Duration {
	base, limit := max(p.Base, 0), max(p.Max, 0)
	shift := max(attempt, 1) - 1
	var d time.Duration
	switch {
	case base == 0:
	case shift >= 63 || base > limit>>uint(shift):
		d = limit
	default:
		d = base << uint(shift)
	}
	if p.Jitter > 0 && rnd != nil {
		j := time.Duration(rnd(int64(p.Jitter)))
		j = min(max(j, 0), p.Jitter-1)
		if d > math.MaxInt64-j {
			return math.MaxInt64
		}
		d += j
	}
	return d
}
