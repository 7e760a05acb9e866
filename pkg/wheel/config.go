package wheel

import (
	"fmt"
	"math"
	"time"
)

// Level is one ring of the wheel: Slots buckets, each covering Tick.
type Level struct {
	// Tick is the time one slot covers. It must be positive.
	Tick time.Duration
	// Slots is the number of slots in the ring. It must be at least 2.
	Slots int
}

// Span is the time the whole ring covers: Tick × Slots.
func (l Level) Span() time.Duration { return l.Tick * time.Duration(l.Slots) }

// Config configures a wheel. Levels[0] is the finest level. Each higher
// level's Tick must be a whole multiple of the Tick below it and no longer
// than the span (Tick × Slots) of the level below, so that one slot of the
// higher level always fits into the level below when it is cascaded down.
// Kafka's layout (upper Tick equal to the lower span) and overlapping layouts
// such as DefaultConfig (10 ms × 1000 = 10 s below a 1 s tick) are both valid.
// Deadlines beyond the top level's span wait in an overflow min-heap.
type Config struct {
	Levels []Level
}

// Limits of a Config, chosen so that slot ids fit the packed list links.
const (
	// MaxSlots is the largest Slots value of one level.
	MaxSlots = 1 << 22
	// MaxTotalSlots is the largest sum of Slots over all levels.
	MaxTotalSlots = 1 << 24
)

// DefaultConfig returns 10 ms × 1000 slots, then 1 s × 3600 slots: items
// fire at most one 10 ms tick after their deadline; deadlines up to an hour
// ahead live in the wheel and later ones in the overflow heap.
func DefaultConfig() Config {
	return Config{Levels: []Level{
		{Tick: 10 * time.Millisecond, Slots: 1000},
		{Tick: time.Second, Slots: 3600},
	}}
}

// FineConfig returns the 1 ms lane: 1 ms × 1000 slots, then 1 s × 3600 slots.
func FineConfig() Config {
	return Config{Levels: []Level{
		{Tick: time.Millisecond, Slots: 1000},
		{Tick: time.Second, Slots: 3600},
	}}
}

// Validate reports whether c describes a usable wheel. The error wraps
// ErrConfig and names the field at fault.
func (c Config) Validate() error {
	if len(c.Levels) == 0 {
		return fmt.Errorf("%w: Levels: need at least one level", ErrConfig)
	}
	total := 0
	for i, l := range c.Levels {
		if l.Tick <= 0 {
			return fmt.Errorf("%w: Levels[%d].Tick: %v is not positive", ErrConfig, i, l.Tick)
		}
		if l.Slots < 2 || l.Slots > MaxSlots {
			return fmt.Errorf("%w: Levels[%d].Slots: %d is outside [2, %d]", ErrConfig, i, l.Slots, MaxSlots)
		}
		if int64(l.Tick) > math.MaxInt64/int64(l.Slots) {
			return fmt.Errorf("%w: Levels[%d]: Tick %v × Slots %d overflows a time.Duration", ErrConfig, i, l.Tick, l.Slots)
		}
		total += l.Slots
		if total > MaxTotalSlots {
			return fmt.Errorf("%w: Levels[%d].Slots: more than %d slots in all levels", ErrConfig, i, MaxTotalSlots)
		}
		if i == 0 {
			continue
		}
		lo := c.Levels[i-1]
		if l.Tick <= lo.Tick || l.Tick%lo.Tick != 0 {
			return fmt.Errorf("%w: Levels[%d].Tick: %v is not a multiple (> 1) of Levels[%d].Tick %v",
				ErrConfig, i, l.Tick, i-1, lo.Tick)
		}
		if l.Tick > lo.Span() {
			return fmt.Errorf("%w: Levels[%d].Tick: %v is longer than the span of Levels[%d] (%v × %d = %v)",
				ErrConfig, i, l.Tick, i-1, lo.Tick, lo.Slots, lo.Span())
		}
	}
	return nil
}
