package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestResendGate: the resends of one agent run one at a time; requests
// that come while one runs are folded into one more, with the latest
// resume point, after the interval; another agent's are not held up.
func TestResendGate(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var slept []time.Duration
	g := resendGate{every: time.Minute,
		mono: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		sleep: func(_ context.Context, d time.Duration) bool {
			mu.Lock()
			defer mu.Unlock()
			slept = append(slept, d)
			now = now.Add(d)
			return true
		}}
	ctx := context.Background()
	var ran []uint64
	var otherRan bool
	// While edge-1's first resend runs, three more requests come (one
	// with a lower resume point) and edge-2's.
	g.request(ctx, "edge-1", 10, func(_ context.Context, after uint64) {
		ran = append(ran, after)
		if len(ran) > 1 {
			return
		}
		mu.Lock()
		now = now.Add(5 * time.Second)
		mu.Unlock()
		for _, a := range []uint64{12, 11, 20} {
			g.request(ctx, "edge-1", a, func(context.Context, uint64) { t.Error("a folded request ran on its own goroutine") })
		}
		g.request(ctx, "edge-2", 3, func(context.Context, uint64) { otherRan = true })
	})
	if !slices.Equal(ran, []uint64{10, 20}) {
		t.Fatalf("resends ran with %v, want [10 20]", ran)
	}
	if !slices.Equal(slept, []time.Duration{55 * time.Second}) {
		t.Fatalf("waited %v, want [55s]: the second resend a minute after the first", slept)
	}
	if !otherRan {
		t.Fatal("another agent's resend was held up")
	}
	// A request a minute later runs at once.
	ran, slept = nil, nil
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	g.request(ctx, "edge-1", 30, func(_ context.Context, after uint64) { ran = append(ran, after) })
	if !slices.Equal(ran, []uint64{30}) || len(slept) != 0 {
		t.Fatalf("later request: ran %v, waited %v; want [30] at once", ran, slept)
	}
}
