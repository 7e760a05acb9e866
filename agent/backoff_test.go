package agent

import (
	"testing"
	"time"
)

func TestFullJitterBounds(t *testing.T) {
	top := func(n int64) int64 { return n - 1 } // the largest value the source may return
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {64, 30 * time.Second}} {
		if got := fullJitter(c.n, time.Second, 30*time.Second, top); got != c.want {
			t.Errorf("fullJitter(%d) upper bound = %s, want %s", c.n, got, c.want)
		}
		if got := fullJitter(c.n, time.Second, 30*time.Second, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("fullJitter(%d) lower bound = %s, want 0", c.n, got)
		}
	}
	if got := fullJitter(3, 0, time.Second, top); got != 0 {
		t.Errorf("base 0: %s", got)
	}
}
