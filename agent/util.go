package agent

import (
	"slices"
	"time"
)

func sortDurations(d []time.Duration) { slices.Sort(d) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
