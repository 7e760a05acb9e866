package schedule

import (
	"testing"
	"time"
)

func benchPlan(b *testing.B, spec Spec, m Misfire) {
	created := mustTime(b, "2025-01-01T00:00:00Z")
	now := mustTime(b, "2026-01-01T00:00:00Z")
	s := mustParse(b, spec, created)
	var runs int
	for b.Loop() {
		runs = len(Plan(s, m, created, now).Run)
	}
	b.ReportMetric(float64(runs), "runs/op")
}

// A year offline, planned: cost must not grow with the number of missed fires.
func BenchmarkPlanYearEvery1msFireAllMaxCap(b *testing.B) {
	benchPlan(b, Spec{Every: "1ms"}, Misfire{Policy: FireAll, Cap: MaxMisfireCap})
}

func BenchmarkPlanYearCronSecondFireOnce(b *testing.B) {
	benchPlan(b, Spec{Cron: "* * * * * *", Timezone: "Europe/Berlin"}, Misfire{})
}

func BenchmarkPlanYearCronSecondFireAllDefaultCap(b *testing.B) {
	benchPlan(b, Spec{Cron: "* * * * * *", Timezone: "Europe/Berlin"}, Misfire{Policy: FireAll})
}

func BenchmarkPlanYearCronMinuteFireAllMaxCap(b *testing.B) {
	benchPlan(b, Spec{Cron: "* * * * *", Timezone: "Europe/Berlin"}, Misfire{Policy: FireAll, Cap: MaxMisfireCap})
}

func BenchmarkNextCronZone(b *testing.B) {
	s := mustParse(b, Spec{Cron: "*/5 * * * *", Timezone: "America/New_York"}, mustTime(b, "2026-01-01T00:00:00Z"))
	t := mustTime(b, "2026-05-10T10:00:00Z")
	for b.Loop() {
		t, _ = s.Next(t)
	}
}

func BenchmarkNextEvery(b *testing.B) {
	s := mustParse(b, Spec{Every: "5m"}, mustTime(b, "2026-01-01T00:00:00Z"))
	t := mustTime(b, "2026-05-10T10:00:00Z")
	for b.Loop() {
		t, _ = s.Next(t)
	}
	_ = t.Add(time.Second)
}
