package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestMisfireValidate(t *testing.T) {
	ok := []Misfire{
		{},
		{Policy: FireOnce},
		{Policy: FireAll, Cap: 5, Grace: time.Minute},
		{Policy: Skip, Grace: MaxMisfireGrace},
		{Policy: FireAll, Cap: MaxMisfireCap},
	}
	for _, m := range ok {
		if err := m.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", m, err)
		}
	}
	bad := []struct {
		m     Misfire
		field string
	}{
		{Misfire{Policy: "fire_twice"}, "misfire.policy"},
		{Misfire{Policy: "FIRE_ONCE"}, "misfire.policy"},
		{Misfire{Grace: -time.Second}, "misfire.grace"},
		{Misfire{Grace: MaxMisfireGrace + 1}, "misfire.grace"},
		{Misfire{Cap: -1}, "misfire.cap"},
		{Misfire{Cap: MaxMisfireCap + 1}, "misfire.cap"},
	}
	for _, tt := range bad {
		err := tt.m.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrInvalidMisfire) {
			t.Errorf("Validate(%+v) = %v, want a %s error wrapping ErrInvalidMisfire", tt.m, err, tt.field)
		}
	}
}

// minutes returns 10:mm:00Z on 2026-05-10 for each m (negative = earlier hour).
func minutes(t testing.TB, ms ...int) []time.Time {
	base := mustTime(t, "2026-05-10T10:00:00Z")
	var out []time.Time
	for _, m := range ms {
		out = append(out, base.Add(time.Duration(m)*time.Minute))
	}
	return out
}

// minuteRange is minutes(t, from, from+1, ..., to).
func minuteRange(t testing.TB, from, to int) []time.Time {
	var ms []int
	for m := from; m <= to; m++ {
		ms = append(ms, m)
	}
	return minutes(t, ms...)
}

func TestPlanEveryMinute(t *testing.T) {
	// every 1m from 09:00:00, so fires are on whole minutes; last handled fire 10:00.
	created := mustTime(t, "2026-05-10T09:00:00Z")
	s := mustParse(t, Spec{Every: "1m"}, created)
	last := mustTime(t, "2026-05-10T10:00:00Z")
	at := func(m int, sec int) time.Time {
		return last.Add(time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
	}
	tests := []struct {
		name     string
		m        Misfire
		now      time.Time
		run      []time.Time
		missed   int
		first    time.Time
		lastMiss time.Time
	}{
		{"nothing due", Misfire{}, at(0, 59), nil, 0, time.Time{}, time.Time{}},
		{"now before last", Misfire{}, at(-5, 0), nil, 0, time.Time{}, time.Time{}},
		{"one due exactly now, no grace, fire_once", Misfire{}, at(1, 0), minutes(t, 1), 0, time.Time{}, time.Time{}},
		{"one late, fire_once", Misfire{}, at(1, 30), minutes(t, 1), 0, time.Time{}, time.Time{}},
		{"one late, skip", Misfire{Policy: Skip}, at(1, 30), nil, 1, at(1, 0), at(1, 0)},
		{"one within grace, skip", Misfire{Policy: Skip, Grace: 45 * time.Second}, at(1, 30), minutes(t, 1), 0, time.Time{}, time.Time{}},
		{"grace is inclusive", Misfire{Policy: Skip, Grace: 30 * time.Second}, at(1, 30), minutes(t, 1), 0, time.Time{}, time.Time{}},
		{"just past grace", Misfire{Policy: Skip, Grace: 29 * time.Second}, at(1, 30), nil, 1, at(1, 0), at(1, 0)},
		{"hour down, fire_once runs latest", Misfire{}, at(60, 10), minutes(t, 60), 59, at(1, 0), at(59, 0)},
		{"hour down, fire_once with on-time fire runs it only", Misfire{Grace: 30 * time.Second}, at(60, 10), minutes(t, 60), 59, at(1, 0), at(59, 0)},
		{"hour down, fire_once, grace covers 3", Misfire{Grace: 2*time.Minute + 10*time.Second}, at(60, 10), minutes(t, 58, 59, 60), 57, at(1, 0), at(57, 0)},
		{"hour down, skip, grace covers 3", Misfire{Policy: Skip, Grace: 2*time.Minute + 10*time.Second}, at(60, 10), minutes(t, 58, 59, 60), 57, at(1, 0), at(57, 0)},
		{"hour down, skip, grace covers 3, cap 2", Misfire{Policy: Skip, Grace: 2*time.Minute + 10*time.Second, Cap: 2}, at(60, 10), minutes(t, 59, 60), 58, at(1, 0), at(58, 0)},
		{"hour down, skip, no grace", Misfire{Policy: Skip}, at(60, 10), nil, 60, at(1, 0), at(60, 0)},
		{"hour down, fire_all under cap", Misfire{Policy: FireAll}, at(5, 0), minutes(t, 1, 2, 3, 4, 5), 0, time.Time{}, time.Time{}},
		{"hour down, fire_all cap 3 runs newest", Misfire{Policy: FireAll, Cap: 3}, at(60, 10), minutes(t, 58, 59, 60), 57, at(1, 0), at(57, 0)},
		{"fire_all exactly cap", Misfire{Policy: FireAll, Cap: 5}, at(5, 59), minutes(t, 1, 2, 3, 4, 5), 0, time.Time{}, time.Time{}},
		{"fire_all default cap 100", Misfire{Policy: FireAll}, at(150, 0), minuteRange(t, 51, 150), 50, at(1, 0), at(50, 0)},
		{"unknown policy is fire_once", Misfire{Policy: "nonsense"}, at(3, 0), minutes(t, 3), 2, at(1, 0), at(2, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Plan(s, tt.m, last, tt.now)
			if !equalTimes(p.Run, tt.run) {
				t.Errorf("Run = %v, want %v", fmtTimes(p.Run), fmtTimes(tt.run))
			}
			if p.Missed != tt.missed {
				t.Errorf("Missed = %d, want %d", p.Missed, tt.missed)
			}
			if !p.FirstMissed.Equal(tt.first) || !p.LastMissed.Equal(tt.lastMiss) {
				t.Errorf("missed range = [%v, %v], want [%v, %v]", p.FirstMissed, p.LastMissed, tt.first, tt.lastMiss)
			}
		})
	}
}

func TestPlanOneShot(t *testing.T) {
	created := mustTime(t, "2026-05-10T10:00:00Z")
	s := mustParse(t, Spec{Delay: "30m"}, created)
	fire := created.Add(30 * time.Minute)
	now := fire.Add(2 * time.Hour)
	if p := Plan(s, Misfire{}, time.Time{}, now); !equalTimes(p.Run, []time.Time{fire}) || p.Missed != 0 {
		t.Errorf("fire_once late one-shot: %+v", p)
	}
	if p := Plan(s, Misfire{Policy: Skip}, time.Time{}, now); len(p.Run) != 0 || p.Missed != 1 || !p.FirstMissed.Equal(fire) {
		t.Errorf("skip late one-shot: %+v", p)
	}
	if p := Plan(s, Misfire{Policy: Skip, Grace: 3 * time.Hour}, time.Time{}, now); !equalTimes(p.Run, []time.Time{fire}) {
		t.Errorf("skip one-shot within grace: %+v", p)
	}
	if p := Plan(s, Misfire{}, fire, now); len(p.Run) != 0 || p.Missed != 0 {
		t.Errorf("already fired one-shot: %+v", p)
	}
}

// TestPlanCronDST: an hourly Berlin job down across the fall-back night
// misses the repeated 02:00 twice, as the schedule fires it twice.
func TestPlanCronDST(t *testing.T) {
	s := mustParse(t, Spec{Cron: "0 * * * *", Timezone: "Europe/Berlin"}, mustTime(t, "2026-01-01T00:00:00Z"))
	last := mustTime(t, "2026-10-24T22:00:00Z") // 00:00 CEST
	now := mustTime(t, "2026-10-25T05:30:00Z")  // 06:30 CET
	// Fires: 23Z, 00Z(02 CEST), 01Z(02 CET), 02Z, 03Z, 04Z, 05Z = 7.
	p := Plan(s, Misfire{Policy: FireAll, Cap: 2}, last, now)
	if want := []time.Time{mustTime(t, "2026-10-25T04:00:00Z"), mustTime(t, "2026-10-25T05:00:00Z")}; !equalTimes(p.Run, want) {
		t.Errorf("Run = %v, want %v", fmtTimes(p.Run), fmtTimes(want))
	}
	if p.Missed != 5 || !p.FirstMissed.Equal(mustTime(t, "2026-10-24T23:00:00Z")) || !p.LastMissed.Equal(mustTime(t, "2026-10-25T03:00:00Z")) {
		t.Errorf("missed = %d [%v, %v], want 5 [23:00Z, 03:00Z]", p.Missed, p.FirstMissed, p.LastMissed)
	}
}

// TestPlanBounded: a year offline must neither enumerate 3·10^10 fires of an
// `every: 1ms` job nor 3·10^7 fires of a per-second cron job.
func TestPlanBounded(t *testing.T) {
	created := mustTime(t, "2025-01-01T00:00:00Z")
	last := created
	now := mustTime(t, "2026-01-01T00:00:00Z")
	yearMs := now.Sub(last).Milliseconds()
	yearS := int64(now.Sub(last) / time.Second)
	tests := []struct {
		name   string
		spec   Spec
		m      Misfire
		total  int64 // fires in (last, now]
		runLen int
	}{
		{"every 1ms fire_all", Spec{Every: "1ms"}, Misfire{Policy: FireAll, Cap: MaxMisfireCap}, yearMs, MaxMisfireCap},
		{"every 1ms fire_once", Spec{Every: "1ms"}, Misfire{}, yearMs, 1},
		{"every 1ms skip with 1m grace", Spec{Every: "1ms"}, Misfire{Policy: Skip, Grace: time.Minute}, yearMs, DefaultMisfireCap},
		{"cron every second fire_all", Spec{Cron: "* * * * * *", Timezone: "Europe/Berlin"}, Misfire{Policy: FireAll}, yearS, DefaultMisfireCap},
		{"cron every second fire_once", Spec{Cron: "* * * * * *", Timezone: "America/New_York"}, Misfire{}, yearS, 1},
		{"cron every second skip", Spec{Cron: "* * * * * *"}, Misfire{Policy: Skip, Grace: 10 * time.Second}, yearS, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, created)
			p := Plan(s, tt.m, last, now)
			if len(p.Run) != tt.runLen {
				t.Fatalf("len(Run) = %d, want %d", len(p.Run), tt.runLen)
			}
			if got := int64(p.Missed) + int64(len(p.Run)); got != tt.total && !(p.Missed == math.MaxInt) {
				t.Errorf("Missed+Run = %d, want %d", got, tt.total)
			}
			if !p.Run[len(p.Run)-1].Equal(now) {
				t.Errorf("newest run = %v, want %v", p.Run[len(p.Run)-1], now)
			}
			if !slices.IsSortedFunc(p.Run, func(a, b time.Time) int { return a.Compare(b) }) {
				t.Errorf("Run not sorted")
			}
			if next, _ := s.Next(p.LastMissed); !next.Equal(p.Run[0]) {
				t.Errorf("LastMissed %v is not just before Run[0] %v", p.LastMissed, p.Run[0])
			}
		})
	}
}

// TestPlanMatchesReference compares Plan with a brute-force reference that
// enumerates every fire, over random schedules, windows (DST included),
// policies, graces and caps — for this package's schedules and for a foreign
// Schedule (which exercises the generic count and bisection paths).
func TestPlanMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	crons := []string{"* * * * *", "*/7 * * * *", "0 * * * *", "30 2 * * *", "0 1-3 * * *", "15,45 */2 * * *",
		"*/20 * * * * *", "0 0 * * mon", "5 4 1,15 * *", "0 30 1 * * *"}
	zones := []string{"", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Sao_Paulo"}
	everys := []string{"1m", "7m", "90s", "1h", "13s"}
	starts := []string{"2026-03-07T20:00:00Z", "2026-10-24T20:00:00Z", "2026-10-31T20:00:00Z", "2026-04-04T12:00:00Z", "2018-11-03T00:00:00Z", "2026-06-01T00:00:00Z"}
	policies := []MisfirePolicy{FireOnce, FireAll, Skip}
	for i := range 400 {
		var spec Spec
		if i%3 == 0 {
			spec = Spec{Every: everys[rng.IntN(len(everys))]}
		} else {
			spec = Spec{Cron: crons[rng.IntN(len(crons))], Timezone: zones[rng.IntN(len(zones))]}
		}
		start := mustTime(t, starts[rng.IntN(len(starts))])
		created := start.Add(-time.Duration(rng.IntN(3600)) * time.Second)
		s := mustParse(t, spec, created)
		last := start.Add(time.Duration(rng.IntN(7200)) * time.Second)
		now := last.Add(time.Duration(rng.Int64N(int64(40 * time.Hour))))
		m := Misfire{Policy: policies[rng.IntN(3)], Grace: time.Duration(rng.IntN(4)) * time.Duration(rng.Int64N(int64(3*time.Hour))), Cap: rng.IntN(30)}
		want := referencePlan(s, m, last, now)
		for _, impl := range []Schedule{s, foreign{s}} {
			got := Plan(impl, m, last, now)
			if !equalTimes(got.Run, want.Run) || got.Missed != want.Missed ||
				!got.FirstMissed.Equal(want.FirstMissed) || !got.LastMissed.Equal(want.LastMissed) {
				t.Fatalf("case %d %+v %+v last=%v now=%v (%T):\n got  %s\n want %s", i, spec, m, last, now, impl, fmtPlan(got), fmtPlan(want))
			}
		}
	}
}

func TestCountMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	crons := []string{"* * * * * *", "*/13 * * * *", "0 * * * *", "30 2 * * *", "0,30 0-3 * * *", "59 23 * * *", "0 0 * * *", "*/5 1-2 * * 0"}
	zones := []string{"", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Sao_Paulo", "Asia/Kolkata", "Pacific/Chatham"}
	for range 300 {
		spec := Spec{Cron: crons[rng.IntN(len(crons))], Timezone: zones[rng.IntN(len(zones))]}
		c := mustParse(t, spec, mustTime(t, "2018-01-01T00:00:00Z")).(cronSchedule)
		a := mustTime(t, "2018-01-01T00:00:00Z").Add(time.Duration(rng.Int64N(int64(9 * 365 * 24 * time.Hour))))
		span := time.Duration(rng.Int64N(int64(72 * time.Hour)))
		if spec.Cron == "* * * * * *" {
			span /= 20
		}
		b := a.Add(span)
		var n int64
		for f, ok := c.Next(a); ok && !f.After(b); f, ok = c.Next(f) {
			n++
		}
		if got := c.countIn(a, b); got != n {
			t.Fatalf("%+v countIn(%v, %v) = %d, enumeration = %d", spec, a, b, got, n)
		}
	}
}

// foreign hides the package's arithmetic so Plan takes its generic paths.
type foreign struct{ s Schedule }

func (f foreign) Next(after time.Time) (time.Time, bool) { return f.s.Next(after) }
func (f foreign) Periodic() bool                         { return f.s.Periodic() }

func referencePlan(s Schedule, m Misfire, last, now time.Time) MisfirePlan {
	m = m.withDefaults()
	var all []time.Time
	for f, ok := s.Next(last); ok && !f.After(now); f, ok = s.Next(f) {
		all = append(all, f)
	}
	n := len(all)
	o := 0
	for _, f := range all {
		if now.Sub(f) <= m.Grace {
			o++
		}
	}
	var k int
	switch m.Policy {
	case FireAll:
		k = min(n, m.Cap)
	case Skip:
		k = min(o, m.Cap)
	default:
		k = min(o, m.Cap)
		if k == 0 && n > 0 {
			k = 1
		}
	}
	p := MisfirePlan{Missed: n - k}
	if k > 0 {
		p.Run = all[n-k:]
	}
	if n-k > 0 {
		p.FirstMissed, p.LastMissed = all[0], all[n-k-1]
	}
	return p
}

func equalTimes(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, func(x, y time.Time) bool { return x.Equal(y) })
}

func fmtTimes(ts []time.Time) string {
	out := "["
	for i, t := range ts {
		if i > 0 {
			out += " "
		}
		out += t.UTC().Format("01-02T15:04:05")
	}
	return out + "]"
}

func fmtPlan(p MisfirePlan) string {
	return fmt.Sprintf("run=%s missed=%d [%s, %s]", fmtTimes(p.Run), p.Missed,
		p.FirstMissed.UTC().Format(time.RFC3339), p.LastMissed.UTC().Format(time.RFC3339))
}
