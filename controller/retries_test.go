package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
)

// TestRetrySchedulesKeepTheLatestAttempt: the retry timer of an execution
// is replaced by a later attempt's and never by an earlier one's. An
// earlier attempt comes from a stale read of the record (a shard reload's
// scan that read it before a report moved it on, TestFaultInjection seed
// 131); letting it replace the later timer left the execution
// RETRY_WAITING with no timer: the stale one fired, found its attempt no
// longer due, and nothing sent the next attempt. Only the latest timer
// fires.
func TestRetrySchedulesKeepTheLatestAttempt(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	r, err := newRetrier(&core{clk: clk, m: m, log: testutil.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	r.schedule("x", "j", 1, start.Add(time.Second))   // attempt 1 failed
	r.schedule("x", "j", 2, start.Add(3*time.Second)) // attempt 2 failed: replaces it
	r.schedule("x", "j", 1, start.Add(time.Second))   // a stale read of the record: ignored
	r.schedule("x", "j", 2, start.Add(time.Minute))   // the same attempt again: kept as it is
	if e := r.handles["x"]; e.attempt != 2 || len(r.handles) != 1 {
		t.Fatalf("pending timers %+v, want one, of attempt 2", r.handles)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 10*time.Second, "the wheel waiting on the clock", func() bool { return clk.Timers() > 0 })
	clk.Advance(5 * time.Second)
	testutil.Eventually(t, 10*time.Second, "the timer of attempt 2 fired", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.queue) > 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) != 1 || r.queue[0].Attempt != 2 || len(r.handles) != 0 {
		t.Fatalf("fired %+v with %d timers left, want attempt 2 alone", r.queue, len(r.handles))
	}
}
