package schedule

import (
	"testing"
	"time"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustParse(t testing.TB, s Spec, created time.Time) Schedule {
	t.Helper()
	sc, err := Parse(s, created)
	if err != nil {
		t.Fatalf("Parse(%+v): %v", s, err)
	}
	return sc
}

func TestNext(t *testing.T) {
	const created = "2026-05-10T10:00:30Z"
	tests := []struct {
		name     string
		spec     Spec
		after    string
		want     string // "" = no fire
		periodic bool
	}{
		{"asap before", Spec{Asap: true}, "2026-05-10T10:00:29Z", created, false},
		{"asap at created is not after", Spec{Asap: true}, created, "", false},
		{"at future", Spec{At: "2026-12-01T02:00:00+01:00"}, created, "2026-12-01T01:00:00Z", false},
		{"at past", Spec{At: "2026-12-01T02:00:00Z"}, "2026-12-01T02:00:00Z", "", false},
		{"delay", Spec{Delay: "30m"}, created, "2026-05-10T10:30:30Z", false},
		{"delay one ns before", Spec{Delay: "30m"}, "2026-05-10T10:30:29.999999999Z", "2026-05-10T10:30:30Z", false},
		{"delay after", Spec{Delay: "30m"}, "2026-05-10T10:30:30Z", "", false},
		{"every first", Spec{Every: "5m"}, created, "2026-05-10T10:05:30Z", true},
		{"every before created", Spec{Every: "5m"}, "2020-01-01T00:00:00Z", "2026-05-10T10:05:30Z", true},
		{"every zero after", Spec{Every: "5m"}, "0001-01-01T00:00:00Z", "2026-05-10T10:05:30Z", true},
		{"every on a fire", Spec{Every: "5m"}, "2026-05-10T10:10:30Z", "2026-05-10T10:15:30Z", true},
		{"every between", Spec{Every: "5m"}, "2026-05-10T10:12:00Z", "2026-05-10T10:15:30Z", true},
		{"every 1ms far", Spec{Every: "1ms"}, "2027-05-10T10:00:30.0005Z", "2027-05-10T10:00:30.001Z", true},
		{"cron first after created", Spec{Cron: "* * * * *"}, "2000-01-01T00:00:00Z", "2026-05-10T10:01:00Z", true},
		{"cron seconds field", Spec{Cron: "*/20 * * * * *"}, created, "2026-05-10T10:00:40Z", true},
		{"cron strictly after", Spec{Cron: "0 * * * *"}, "2026-05-10T11:00:00Z", "2026-05-10T12:00:00Z", true},
		{"cron zone", Spec{Cron: "0 2 * * *", Timezone: "Asia/Tokyo"}, created, "2026-05-10T17:00:00Z", true},
		{"cron weekday", Spec{Cron: "0 9 * * mon"}, created, "2026-05-11T09:00:00Z", true},
		{"cron leap day", Spec{Cron: "0 0 29 2 *"}, created, "2028-02-29T00:00:00Z", true},
		{"cron leap day across 2100", Spec{Cron: "0 0 29 2 *"}, "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z", true},
		{"hourly", Spec{Cron: "@hourly"}, created, "2026-05-10T11:00:00Z", true},
		{"cron @every anchored", Spec{Cron: "@every 90s"}, "2026-05-10T10:03:00Z", "2026-05-10T10:03:30Z", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, mustTime(t, created))
			if s.Periodic() != tt.periodic {
				t.Errorf("Periodic() = %v, want %v", s.Periodic(), tt.periodic)
			}
			got, ok := s.Next(mustTime(t, tt.after))
			if tt.want == "" {
				if ok || !got.IsZero() {
					t.Fatalf("Next = %v, %v; want zero, false", got, ok)
				}
				return
			}
			if !ok || !got.Equal(mustTime(t, tt.want)) {
				t.Fatalf("Next = %v, %v; want %s, true", got.UTC(), ok, tt.want)
			}
		})
	}
}

func TestPeriod(t *testing.T) {
	created := mustTime(t, "2026-05-10T10:00:00Z")
	if p, ok := Period(mustParse(t, Spec{Every: "5m"}, created)); !ok || p != 5*time.Minute {
		t.Errorf("Period(every 5m) = %v, %v", p, ok)
	}
	if p, ok := Period(mustParse(t, Spec{Cron: "@every 2m"}, created)); !ok || p != 2*time.Minute {
		t.Errorf("Period(@every 2m) = %v, %v", p, ok)
	}
	if _, ok := Period(mustParse(t, Spec{Cron: "@hourly"}, created)); ok {
		t.Errorf("Period(@hourly) ok = true")
	}
}

// TestCronDST pins robfig/cron/v3's daylight-saving semantics, which ax keeps:
// a wall time that does not exist (spring-forward) is skipped that day; a wall
// time that exists twice (fall-back) fires twice, once in each offset.
func TestCronDST(t *testing.T) {
	tests := []struct {
		name  string
		cron  string
		zone  string
		after string
		want  []string // consecutive fires, UTC
	}{
		{
			// 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 does not exist, no fire that day.
			"new york spring forward daily 02:30", "30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"},
		},
		{
			// Hourly: 01:00 EST then 03:00 EDT, one hour apart in real time.
			"new york spring forward hourly", "0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},
		},
		{
			// 2026-11-01 02:00 EDT -> 01:00 EST: 01:00 and 01:30 happen twice and fire twice.
			"new york fall back hourly", "0 * * * *", "America/New_York", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"},
		},
		{
			"new york fall back daily 01:30 fires twice", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"},
		},
		{
			// 2026-03-29 02:00 CET -> 03:00 CEST.
			"berlin spring forward daily 02:30", "30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"},
		},
		{
			// 2026-10-25 03:00 CEST -> 02:00 CET: 02:00 fires at 00:00Z and 01:00Z.
			"berlin fall back hourly", "0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"},
		},
		{
			"berlin fall back half-hourly", "*/30 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"},
		},
		{
			"berlin daily 02:00 in summer and winter", "0 2 * * *", "Europe/Berlin", "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T00:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-26T01:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, Spec{Cron: tt.cron, Timezone: tt.zone}, mustTime(t, "2026-01-01T00:00:00Z"))
			at := mustTime(t, tt.after)
			for i, w := range tt.want {
				got, ok := s.Next(at)
				if !ok || !got.Equal(mustTime(t, w)) {
					t.Fatalf("fire %d: Next(%s) = %s, %v; want %s", i, at.UTC().Format(time.RFC3339), got.UTC().Format(time.RFC3339), ok, w)
				}
				at = got
			}
		})
	}
}

func TestEveryArithmeticLongSpans(t *testing.T) {
	created := mustTime(t, "1970-01-01T00:00:00Z")
	e := mustParse(t, Spec{Every: "1ms"}, created).(every)
	far := mustTime(t, "2500-01-01T00:00:00.0000005Z") // > 292 years: time.Duration would saturate
	want := far.UnixMilli()                            // created is the Unix epoch
	if got := e.index(far); got != want {
		t.Fatalf("index = %d, want %d", got, want)
	}
	next, _ := e.Next(far)
	if !next.Equal(mustTime(t, "2500-01-01T00:00:00.001Z")) {
		t.Fatalf("Next = %v", next)
	}
	if got := e.fire(e.index(far)); !got.Equal(mustTime(t, "2500-01-01T00:00:00Z")) {
		t.Fatalf("fire(index) = %v", got)
	}

	// A 7s period across 300 years, checked in whole Unix seconds.
	created = mustTime(t, "2026-05-10T10:00:30Z")
	e7 := mustParse(t, Spec{Every: "7s"}, created)
	after := mustTime(t, "2326-05-10T10:00:30Z")
	k := (after.Unix()-created.Unix())/7 + 1
	if got, _ := e7.Next(after); got.Unix() != created.Unix()+7*k || got.Nanosecond() != 0 {
		t.Fatalf("Next(7s, +300y) = %v, want unix %d", got, created.Unix()+7*k)
	}
}
