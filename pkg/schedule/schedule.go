package schedule

import (
	"math"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule gives fire times. Implementations in this package are immutable
// values, safe for concurrent use. Times they return are compared with
// time.Time.Equal; their Location is not part of the contract.
type Schedule interface {
	// Next returns the first fire time strictly after `after`, or the zero
	// Time and false when there is none (one-shot already past its single
	// fire).
	Next(after time.Time) (time.Time, bool)
	// Periodic reports whether the schedule fires more than once.
	Periodic() bool
}

// counter is implemented by this package's schedules: the number of fires in
// (a, b], computed without enumerating them one by one.
type counter interface {
	countIn(a, b time.Time) int64
}

// prever is implemented by schedules that find the latest fire in (lo, t]
// arithmetically; others are searched with Next (see prevFire).
type prever interface {
	prevIn(lo, t time.Time) (time.Time, bool)
}

// once fires a single time (asap, at, delay).
type once struct{ at time.Time }

func (o once) Next(after time.Time) (time.Time, bool) {
	if o.at.After(after) {
		return o.at, true
	}
	return time.Time{}, false
}

func (o once) Periodic() bool { return false }

func (o once) countIn(a, b time.Time) int64 {
	if o.at.After(a) && !o.at.After(b) {
		return 1
	}
	return 0
}

func (o once) prevIn(lo, t time.Time) (time.Time, bool) {
	if o.at.After(lo) && !o.at.After(t) {
		return o.at, true
	}
	return time.Time{}, false
}

// every fires at anchor + k·period for k = 1, 2, ... All arithmetic is done in
// chunks of at most maxChunk so that spans longer than time.Duration's ~292
// years neither saturate nor overflow.
type every struct {
	anchor time.Time
	period time.Duration
}

const maxChunk = time.Duration(math.MaxInt64 / 4)

// index is the number of fires at or before t (0 before the first fire).
func (e every) index(t time.Time) int64 {
	if !t.After(e.anchor) {
		return 0
	}
	base, acc := e.anchor, int64(0)
	for {
		d := t.Sub(base)
		if d < maxChunk {
			return acc + int64(d/e.period)
		}
		k := maxChunk / e.period
		base = base.Add(k * e.period)
		acc += int64(k)
	}
}

// fire returns the k-th fire time, anchor + k·period.
func (e every) fire(k int64) time.Time {
	t := e.anchor
	step := int64(maxChunk / e.period)
	for k > step {
		t = t.Add(time.Duration(step) * e.period)
		k -= step
	}
	return t.Add(time.Duration(k) * e.period)
}

func (e every) Next(after time.Time) (time.Time, bool) {
	return e.fire(e.index(after) + 1), true
}

func (e every) Periodic() bool { return true }

func (e every) countIn(a, b time.Time) int64 {
	if !b.After(a) {
		return 0
	}
	return e.index(b) - e.index(a)
}

func (e every) prevIn(lo, t time.Time) (time.Time, bool) {
	k := e.index(t)
	if k == 0 {
		return time.Time{}, false
	}
	f := e.fire(k)
	if !f.After(lo) {
		return time.Time{}, false
	}
	return f, true
}

// Period returns the period of an `every` schedule (or a cron "@every"), and
// false for other schedules.
func Period(s Schedule) (time.Duration, bool) {
	if e, ok := s.(every); ok {
		return e.period, true
	}
	return 0, false
}

// cronSchedule fires on a cron expression's matches strictly after created,
// in spec.Location.
//
// Daylight-saving semantics are those of robfig/cron/v3, which walks wall
// clock fields: on a spring-forward day a wall time that does not exist
// (02:30 in New York on 2026-03-08) does not fire at all that day, and on a
// fall-back day a wall time that occurs twice (01:30 in New York on
// 2026-11-01) fires twice, once per offset — an hourly job fires in both
// copies of the repeated hour. The tests pin these instants.
type cronSchedule struct {
	spec    *cron.SpecSchedule
	created time.Time
}

// cronRetries bounds how many further five-year windows Next searches when
// the cron library finds no match in one (leap-day expressions near 2100).
const cronRetries = 4

func (c cronSchedule) Next(after time.Time) (time.Time, bool) {
	from := after
	if from.Before(c.created) {
		from = c.created
	}
	for range cronRetries + 1 {
		if t := c.spec.Next(from); !t.IsZero() {
			return t, true
		}
		// The library searched through the end of year from.Year()+5.
		from = time.Date(from.In(c.spec.Location).Year()+6, time.January, 1, 0, 0, 0, 0, c.spec.Location).Add(-time.Nanosecond)
	}
	return time.Time{}, false
}

func (c cronSchedule) Periodic() bool { return true }
