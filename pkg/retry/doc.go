// Package retry holds the retry policy of a job (backoff with a cap and
// jitter), the outcome and result of an attempt, and the decision the
// controller takes after each attempt (docs/architecture.md, State machine: RETRY_WAITING or a final
// state). It does no I/O and no logging; randomness is passed in.
//
// Example: a job with retry {max_attempts: 4, base: 2s, max: 10s, jitter: 1s}
// whose HTTP handler got a 503 on its first attempt:
//
//	p := retry.Policy{MaxAttempts: 4, Base: 2 * time.Second, Max: 10 * time.Second, Jitter: time.Second}
//	if err := p.Validate(); err != nil {
//		return err // e.g. "retry.max: must be >= retry.base (2s), got 1s"
//	}
//	r := retry.ClassifyHTTP(503)                                    // {Code: 503, Message: "HTTP 503", Retryable: true}
//	d := p.Decide(1, retry.HTTPOutcome(503), r, rand.Int64N)
//	// d.Retry = true, d.Reason = "retryable", d.Delay in [2s, 3s).
//	// Later attempts wait [4s, 5s), then [8s, 9s); after attempt 4 fails,
//	// d.Retry = false and d.Reason = "attempts_exhausted".
//	// A 400 instead: d.Retry = false, d.Reason = "not_retryable".
package retry
