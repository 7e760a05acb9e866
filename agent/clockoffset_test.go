package agent

import (
	"testing"
	"time"
)

// TestOffsetFilter: the estimate is the offset of the kept exchange with
// the shortest round trip; a slow reply does not move it, a clock step
// shows once the older fast samples have left the window, and reset
// forgets everything.
func TestOffsetFilter(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// exchange: the controller's clock is ahead by off; the request takes
	// up ms and the reply down ms.
	exchange := func(f *offsetFilter, at time.Time, off, up, down time.Duration) time.Duration {
		return f.add(at, at.Add(up).Add(off), at.Add(up+down))
	}
	var f offsetFilter
	ms := time.Millisecond
	if got := exchange(&f, base, 500*ms, ms, ms); got != 500*ms {
		t.Fatalf("first exchange: %v, want 500ms", got)
	}
	// A slow, asymmetric reply: one exchange alone would say 500ms+1.4s.
	at := base.Add(5 * time.Second)
	if got := exchange(&f, at, 500*ms, 2800*ms, 0); got != 500*ms {
		t.Fatalf("after a slow exchange: %v, want 500ms (the fast sample)", got)
	}
	// The controller's clock steps by +2s: after offsetSamples fast
	// exchanges at the new offset the estimate follows.
	var got time.Duration
	for i := range offsetSamples {
		at = at.Add(5 * time.Second)
		got = exchange(&f, at, 2500*ms, 2*ms, 2*ms)
		if i < offsetSamples-2 && got != 500*ms {
			t.Fatalf("exchange %d after the step: %v, want the older faster 500ms sample", i, got)
		}
	}
	if got != 2500*ms {
		t.Fatalf("after %d exchanges at the new offset: %v, want 2.5s", offsetSamples, got)
	}
	f.reset()
	if got := exchange(&f, at.Add(time.Second), -300*ms, 40*ms, 40*ms); got != -300*ms {
		t.Fatalf("after reset: %v, want -300ms", got)
	}
}
