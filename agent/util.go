package agent

import (
	"slices"
	"time"
)

func sortDurations(d []time.Duration) { slices.Sort(d) }
