package retry_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

func Example() {
	p := retry.Policy{MaxAttempts: 4, Base: 2 * time.Second, Max: 10 * time.Second, Jitter: time.Second}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	noJitter := func(int64) int64 { return 0 } // use math/rand/v2.Int64N in real code
	for attempt := 1; attempt <= 4; attempt++ {
		d := p.Decide(attempt, retry.HTTPOutcome(503), retry.ClassifyHTTP(503), noJitter)
		fmt.Println(attempt, d.Retry, d.Delay, d.Reason)
	}
	fmt.Println(p.Decide(1, retry.HTTPOutcome(400), retry.ClassifyHTTP(400), noJitter).Reason)
	fmt.Println(retry.Policy{Base: 2 * time.Second, Max: time.Second}.Validate())
	// Output:
	// 1 true 2s retryable
	// 2 true 4s retryable
	// 3 true 8s retryable
	// 4 false 0s attempts_exhausted
	// not_retryable
	// retry.max: must be >= retry.base (2s), got 1s
}
