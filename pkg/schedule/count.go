package schedule

import (
	"math/bits"
	"time"
)

// maxScan bounds how many fires countFires enumerates with Next for a
// Schedule that is not from this package (this package's schedules count
// arithmetically). Beyond it the count is a lower bound.
const maxScan = 1 << 20

// countFires returns the number of fires of s in (a, b].
func countFires(s Schedule, a, b time.Time) int64 {
	if !b.After(a) {
		return 0
	}
	if c, ok := s.(counter); ok {
		return c.countIn(a, b)
	}
	var n int64
	t := a
	for n < maxScan {
		f, ok := s.Next(t)
		if !ok || f.After(b) {
			break
		}
		n++
		t = f
	}
	return n
}

// prevFire returns the latest fire of s in (lo, t]. Schedules of this package
// that can do so answer arithmetically; others are searched with Next: first
// backwards in doubling windows from t, then by bisection to the nanosecond.
// It needs about 64 calls of Next and assumes Next is monotonic
// (Next(x) <= Next(y) for x <= y), as every real schedule is.
func prevFire(s Schedule, lo, t time.Time) (time.Time, bool) {
	if p, ok := s.(prever); ok {
		return p.prevIn(lo, t)
	}
	// fireIn(x): is there a fire in (x, t]?
	fireIn := func(x time.Time) bool {
		f, ok := s.Next(x)
		return ok && !f.After(t)
	}
	if !t.After(lo) || !fireIn(lo) {
		return time.Time{}, false
	}
	good, bad := lo, t // fireIn(good) && !fireIn(bad)
	for w := time.Second; w < maxChunk; w *= 2 {
		x := t.Add(-w)
		if !x.After(good) {
			break
		}
		if fireIn(x) {
			good = x
			break
		}
		bad = x
	}
	for bad.Sub(good) > time.Nanosecond {
		mid := good.Add(bad.Sub(good) / 2)
		if fireIn(mid) {
			good = mid
		} else {
			bad = mid
		}
	}
	return s.Next(good)
}

// countIn counts the cron fires in (a, b] day by day in the schedule's zone.
// On a day without a UTC-offset change it counts the matching
// (hour, minute, second) triples with bit arithmetic; on a day with a change
// (and its oddities, see cronSchedule) it enumerates that day's fires with
// Next. Cost: O(days) plus O(fires) on the few transition days.
func (c cronSchedule) countIn(a, b time.Time) int64 {
	if a.Before(c.created) {
		a = c.created
	}
	if !b.After(a) {
		return 0
	}
	loc := c.spec.Location
	al := a.In(loc)
	y, m, d := al.Date()
	var n int64
	for day := time.Date(y, m, d, 0, 0, 0, 0, loc); !day.After(b); {
		ds := day
		y, m, d = ds.Date()
		de := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		if !de.After(ds) { // cannot happen with real zones; never loop forever
			de = ds.Add(24 * time.Hour)
		}
		if de.After(a) && c.dayMatches(ds) {
			n += c.countDay(ds, de, a, b)
		}
		day = de
	}
	return n
}

// dayMatches reports whether a fire can fall on day's date (month, day of
// month and day of week as the cron library combines them).
func (c cronSchedule) dayMatches(day time.Time) bool {
	s := c.spec
	if 1<<uint(day.Month())&s.Month == 0 {
		return false
	}
	const star = 1 << 63
	domOK := 1<<uint(day.Day())&s.Dom != 0
	dowOK := 1<<uint(day.Weekday())&s.Dow != 0
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// countDay counts the fires in [ds, de) ∩ (a, b].
func (c cronSchedule) countDay(ds, de, a, b time.Time) int64 {
	_, zoneEnd := ds.ZoneBounds()
	clean := ds.Hour() == 0 && ds.Minute() == 0 && ds.Second() == 0 &&
		de.Sub(ds) == 24*time.Hour && (zoneEnd.IsZero() || !zoneEnd.Before(de))
	if clean {
		// Wall clock = ds + elapsed: a fire at second-of-day q is at ds+q·1s.
		return c.upTo(b.Sub(ds)) - c.upTo(a.Sub(ds))
	}
	from := a
	if ds.After(a) {
		from = ds.Add(-time.Nanosecond)
	}
	var n int64
	for t := c.spec.Next(from); !t.IsZero() && t.Before(de) && !t.After(b); t = c.spec.Next(t) {
		n++
	}
	return n
}

// upTo counts the fires of a clean day at offsets <= v from its midnight.
func (c cronSchedule) upTo(v time.Duration) int64 {
	if v < 0 {
		return 0
	}
	q := int64(v / time.Second)
	if q > 86399 {
		q = 86399
	}
	const mask = 1<<60 - 1 // drop the library's "star" bit
	hs, ms, ss := c.spec.Hour&mask, c.spec.Minute&mask, c.spec.Second&mask
	h, mi, s := uint(q/3600), uint(q%3600/60), uint(q%60)
	below := func(k uint) uint64 { return 1<<k - 1 }
	nM, nS := int64(bits.OnesCount64(ms)), int64(bits.OnesCount64(ss))
	n := int64(bits.OnesCount64(hs&below(h))) * nM * nS
	if hs&(1<<h) != 0 {
		n += int64(bits.OnesCount64(ms&below(mi))) * nS
		if ms&(1<<mi) != 0 {
			n += int64(bits.OnesCount64(ss & below(s+1)))
		}
	}
	return n
}
