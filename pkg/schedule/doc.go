// Package schedule turns a job's schedule spec (asap, at, delay, every, or
// cron with a time zone) into fire times, and decides what to do about fires
// missed during downtime (Plan).
//
// It does no I/O and no logging, with one exception: a cron Timezone is
// loaded with time.LoadLocation, which reads the system's zoneinfo database.
// This package does not embed tzdata; a program deployed where
// /usr/share/zoneinfo may be missing should import time/tzdata itself.
//
// Cron expressions are parsed by github.com/robfig/cron/v3: five fields
// (minute hour day-of-month month day-of-week), an optional leading seconds
// field (six fields), or a descriptor (@yearly, @monthly, @weekly, @daily,
// @hourly, "@every 90s"). Its daylight-saving behaviour is kept and pinned by
// tests: a wall time skipped by a spring-forward does not fire that day, and
// a wall time repeated by a fall-back fires twice, once per UTC offset (so a daily 01:30
// job in New York fires twice on 2026-11-01).
//
// Example: a job created at 10:00:30 UTC that runs at minute 0 of every hour
// in Berlin, with the agent back at 15:10 after being down since 11:30:
//
//	spec := schedule.Spec{Cron: "0 * * * *", Timezone: "Europe/Berlin"}
//	if err := spec.Validate(); err != nil {
//		return err // e.g. "schedule.cron: expected 5 or 6 fields, got 3"
//	}
//	s, _ := schedule.Parse(spec, created)        // created = 10:00:30Z
//	first, _ := s.Next(created)                  // 11:00:00Z (13:00 CEST in summer)
//	plan := schedule.Plan(s, schedule.Misfire{}, // fire_once, no grace
//		lastFire, now)                           // lastFire = 11:00Z, now = 15:10Z
//	// plan.Run = [15:00Z]; plan.Missed = 3 (12:00Z, 13:00Z, 14:00Z);
//	// plan.FirstMissed = 12:00Z, plan.LastMissed = 14:00Z.
package schedule
