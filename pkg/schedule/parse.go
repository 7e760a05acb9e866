package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kinds returned by Spec.Kind.
const (
	KindAsap  = "asap"
	KindAt    = "at"
	KindDelay = "delay"
	KindEvery = "every"
	KindCron  = "cron"
)

// MinEvery is the shortest period an `every` schedule may have. It equals the
// resolution of the agent's fine-precision lane (1 ms); on the normal 10 ms
// wheel shorter periods than one tick fire in bursts once per tick. MinEvery
// is a sanity bound, not a recommendation: each fire is an execution that is
// persisted and reported.
const MinEvery = time.Millisecond

// MinCronEvery is the shortest period of a cron "@every" descriptor. The cron
// library works in whole seconds; use `every` for finer periods.
const MinCronEvery = time.Second

// cronParser accepts 5 fields, an optional leading seconds field, and
// descriptors (@hourly, @daily, @every 90s, ...).
const cronOptions = cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor

// neverFiresRef is the instant from which a cron expression's first fire is
// searched to reject expressions that never fire (e.g. "0 0 30 2 *"). The
// cron library searches five years, which from here includes the leap days
// of 2024 and 2028. It is also the anchor Validate parses with.
func neverFiresRef() time.Time { return time.Date(2023, time.December, 31, 0, 0, 0, 0, time.UTC) }

// Kind reports which schedule the Spec sets: "asap", "at", "delay", "every"
// or "cron". It returns "" when not exactly one is set.
func (s Spec) Kind() string {
	set := s.kinds()
	if len(set) != 1 {
		return ""
	}
	return set[0]
}

// kinds lists the kinds that are set, in the order asap, at, delay, every, cron.
// A string field counts as set when it is not empty (whitespace included, so
// that "   " is reported as a bad value rather than as missing).
func (s Spec) kinds() []string {
	var set []string
	if s.Asap {
		set = append(set, KindAsap)
	}
	if s.At != "" {
		set = append(set, KindAt)
	}
	if s.Delay != "" {
		set = append(set, KindDelay)
	}
	if s.Every != "" {
		set = append(set, KindEvery)
	}
	if s.Cron != "" {
		set = append(set, KindCron)
	}
	return set
}

// Validate checks the Spec without a creation time. The error is a
// *FieldError wrapping ErrInvalidSpec and names the field, e.g.
// "schedule.cron: expected 5 or 6 fields, got 3".
//
// Validating a Timezone reads the system's zoneinfo database
// (time.LoadLocation); this package does not embed tzdata. A program that
// runs where /usr/share/zoneinfo may be missing should import time/tzdata.
func (s Spec) Validate() error {
	_, err := Parse(s, neverFiresRef())
	return err
}

// Parse validates the Spec and returns its Schedule. created is the anchor:
// the instant the schedule took effect (job creation or update).
//
//   - asap fires once, at created;
//   - at fires once, at the given instant (which may be before created: it is then
//     simply late, see Plan);
//   - delay fires once, at created+delay;
//   - every fires at created + k·every for k = 1, 2, ...;
//   - cron fires at the expression's matches strictly after created, evaluated
//     in Timezone (UTC when empty). A "@every D" descriptor behaves like
//     `every` with period D (whole seconds, at least MinCronEvery).
func Parse(s Spec, created time.Time) (Schedule, error) {
	set := s.kinds()
	switch len(set) {
	case 0:
		return nil, specErr("schedule", "exactly one of asap, at, delay, every, cron is required", nil)
	case 1:
	default:
		return nil, specErr("schedule", fmt.Sprintf("exactly one of asap, at, delay, every, cron is allowed, got %s", joinAnd(set)), nil)
	}
	if s.Timezone != "" && set[0] != KindCron {
		return nil, specErr("schedule.timezone", "is only valid with cron", nil)
	}
	switch set[0] {
	case KindAsap:
		return once{at: created}, nil
	case KindAt:
		at, err := time.Parse(time.RFC3339, s.At)
		if err != nil {
			return nil, specErr("schedule.at", fmt.Sprintf("%q is not an RFC 3339 time such as 2026-12-01T02:00:00Z", s.At), err)
		}
		return once{at: at}, nil
	case KindDelay:
		d, err := time.ParseDuration(s.Delay)
		if err != nil {
			return nil, specErr("schedule.delay", fmt.Sprintf("%q is not a duration such as 30s or 1h30m", s.Delay), err)
		}
		if d <= 0 {
			return nil, specErr("schedule.delay", fmt.Sprintf("must be > 0, got %s", d), nil)
		}
		return once{at: created.Add(d)}, nil
	case KindEvery:
		d, err := time.ParseDuration(s.Every)
		if err != nil {
			return nil, specErr("schedule.every", fmt.Sprintf("%q is not a duration such as 30s or 5m", s.Every), err)
		}
		if d < MinEvery {
			return nil, specErr("schedule.every", fmt.Sprintf("must be >= %s, got %s", MinEvery, d), nil)
		}
		return every{anchor: created, period: d}, nil
	default:
		return parseCron(s.Cron, s.Timezone, created)
	}
}

func parseCron(expr, zone string, created time.Time) (Schedule, error) {
	loc, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, specErr("schedule.cron", "a TZ= prefix is not allowed; set schedule.timezone instead", nil)
	}
	if !strings.HasPrefix(expr, "@") {
		if n := len(strings.Fields(expr)); n != 5 && n != 6 {
			return nil, specErr("schedule.cron", fmt.Sprintf("expected 5 or 6 fields, got %d", n), nil)
		}
	}
	parsed, err := cron.NewParser(cronOptions).Parse(expr)
	if err != nil {
		return nil, specErr("schedule.cron", fmt.Sprintf("%q: %v", expr, err), err)
	}
	switch p := parsed.(type) {
	case *cron.SpecSchedule:
		p.Location = loc
		if p.Next(neverFiresRef().In(loc)).IsZero() {
			return nil, specErr("schedule.cron", fmt.Sprintf("%q never fires (no date matches, e.g. 30 February)", expr), nil)
		}
		return cronSchedule{spec: p, created: created}, nil
	case cron.ConstantDelaySchedule:
		// "@every D": the library rounds D up to 1s and truncates it to whole
		// seconds; refuse rather than change the period silently.
		d, derr := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every")))
		if derr != nil || d < MinCronEvery || d%time.Second != 0 {
			return nil, specErr("schedule.cron", fmt.Sprintf("%q: @every needs a whole number of seconds >= %s; use schedule.every for other periods", expr, MinCronEvery), derr)
		}
		return every{anchor: created, period: d}, nil
	default:
		return nil, specErr("schedule.cron", fmt.Sprintf("%q: unsupported schedule type %T", expr, parsed), nil)
	}
}

// loadZone loads an IANA zone; "" is UTC. "Local" is refused: it would make
// the schedule depend on the machine it runs on.
func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, specErr("schedule.timezone", `"Local" is not allowed; name an IANA zone such as "Europe/Berlin"`, nil)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, specErr("schedule.timezone", fmt.Sprintf("unknown time zone %q", name), err)
	}
	return loc, nil
}

// joinAnd renders ["at","every","cron"] as "at, every and cron".
func joinAnd(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
