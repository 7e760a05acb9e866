package schedule

import (
	"errors"
	"testing"
	"time"
)

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		kind string
	}{
		{"asap", Spec{Asap: true}, KindAsap},
		{"at utc", Spec{At: "2026-12-01T02:00:00Z"}, KindAt},
		{"at offset and fraction", Spec{At: "2026-12-01T02:00:00.250+05:30"}, KindAt},
		{"at in the past", Spec{At: "2001-01-01T00:00:00Z"}, KindAt},
		{"delay", Spec{Delay: "30m"}, KindDelay},
		{"delay compound", Spec{Delay: "1h30m5s"}, KindDelay},
		{"every", Spec{Every: "5m"}, KindEvery},
		{"every minimum", Spec{Every: "1ms"}, KindEvery},
		{"cron 5 fields", Spec{Cron: "*/1 * * * *"}, KindCron},
		{"cron 6 fields", Spec{Cron: "30 */5 * * * *"}, KindCron},
		{"cron names", Spec{Cron: "0 2 * jan-mar mon-fri"}, KindCron},
		{"cron surrounding space", Spec{Cron: "  0 2 * * *  "}, KindCron},
		{"cron with zone", Spec{Cron: "0 2 * * *", Timezone: "Europe/Berlin"}, KindCron},
		{"cron UTC zone", Spec{Cron: "0 2 * * *", Timezone: "UTC"}, KindCron},
		{"hourly", Spec{Cron: "@hourly"}, KindCron},
		{"daily in zone", Spec{Cron: "@daily", Timezone: "America/New_York"}, KindCron},
		{"yearly", Spec{Cron: "@yearly"}, KindCron},
		{"every descriptor", Spec{Cron: "@every 90s"}, KindCron},
		{"leap day", Spec{Cron: "0 0 29 2 *"}, KindCron},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if got := tt.spec.Kind(); got != tt.kind {
				t.Fatalf("Kind() = %q, want %q", got, tt.kind)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string
		msg   string // exact Error() when not empty
	}{
		{"none", Spec{}, "schedule", "schedule: exactly one of asap, at, delay, every, cron is required"},
		{"timezone only", Spec{Timezone: "UTC"}, "schedule", "schedule: exactly one of asap, at, delay, every, cron is required"},
		{"two", Spec{At: "2026-12-01T02:00:00Z", Every: "5m"}, "schedule",
			"schedule: exactly one of asap, at, delay, every, cron is allowed, got at and every"},
		{"three", Spec{Asap: true, Delay: "1s", Cron: "@daily"}, "schedule",
			"schedule: exactly one of asap, at, delay, every, cron is allowed, got asap, delay and cron"},
		{"at not rfc3339", Spec{At: "2026-12-01 02:00"}, "schedule.at", ""},
		{"at without offset", Spec{At: "2026-12-01T02:00:00"}, "schedule.at", ""},
		{"delay bad", Spec{Delay: "soon"}, "schedule.delay", ""},
		{"delay zero", Spec{Delay: "0s"}, "schedule.delay", "schedule.delay: must be > 0, got 0s"},
		{"delay negative", Spec{Delay: "-5m"}, "schedule.delay", "schedule.delay: must be > 0, got -5m0s"},
		{"every bad", Spec{Every: "5 minutes"}, "schedule.every", ""},
		{"every too short", Spec{Every: "999us"}, "schedule.every", "schedule.every: must be >= 1ms, got 999µs"},
		{"every negative", Spec{Every: "-1m"}, "schedule.every", ""},
		{"cron 3 fields", Spec{Cron: "* * *"}, "schedule.cron", "schedule.cron: expected 5 or 6 fields, got 3"},
		{"cron 7 fields", Spec{Cron: "0 0 0 * * * 2026"}, "schedule.cron", "schedule.cron: expected 5 or 6 fields, got 7"},
		{"cron blank", Spec{Cron: "   "}, "schedule.cron", "schedule.cron: expected 5 or 6 fields, got 0"},
		{"cron minute range", Spec{Cron: "60 * * * *"}, "schedule.cron", ""},
		{"cron garbage", Spec{Cron: "a b c d e"}, "schedule.cron", ""},
		{"cron zero step", Spec{Cron: "*/0 * * * *"}, "schedule.cron", ""},
		{"cron never fires", Spec{Cron: "0 0 30 2 *"}, "schedule.cron", ""},
		{"cron unknown descriptor", Spec{Cron: "@fortnightly"}, "schedule.cron", ""},
		{"cron TZ prefix", Spec{Cron: "TZ=UTC 0 2 * * *"}, "schedule.cron", ""},
		{"cron TZ prefix no space", Spec{Cron: "CRON_TZ=UTC"}, "schedule.cron", ""},
		{"cron @every sub-second", Spec{Cron: "@every 500ms"}, "schedule.cron", ""},
		{"cron @every fraction", Spec{Cron: "@every 1500ms"}, "schedule.cron", ""},
		{"cron @every bad", Spec{Cron: "@every often"}, "schedule.cron", ""},
		{"unknown zone", Spec{Cron: "0 2 * * *", Timezone: "Mars/Base"}, "schedule.timezone",
			`schedule.timezone: unknown time zone "Mars/Base"`},
		{"local zone", Spec{Cron: "0 2 * * *", Timezone: "Local"}, "schedule.timezone", ""},
		{"zone path escape", Spec{Cron: "0 2 * * *", Timezone: "../../etc/passwd"}, "schedule.timezone", ""},
		{"zone without cron", Spec{Every: "5m", Timezone: "Europe/Berlin"}, "schedule.timezone",
			"schedule.timezone: is only valid with cron"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("errors.Is(err, ErrInvalidSpec) = false for %v", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("Error() = %q, want %q", err.Error(), tt.msg)
			}
			if _, perr := Parse(tt.spec, time.Now()); perr == nil {
				t.Errorf("Parse accepted a spec Validate rejects")
			}
		})
	}
}

func TestFieldErrorWrapsCause(t *testing.T) {
	err := Spec{Delay: "soon"}.Validate()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Cause == nil {
		t.Fatalf("want a *FieldError with a Cause, got %#v", err)
	}
	if !errors.Is(err, fe.Cause) {
		t.Errorf("errors.Is(err, Cause) = false")
	}
}

func TestKindNotExactlyOne(t *testing.T) {
	if k := (Spec{}).Kind(); k != "" {
		t.Errorf("empty Spec Kind() = %q, want \"\"", k)
	}
	if k := (Spec{Asap: true, Every: "1m"}).Kind(); k != "" {
		t.Errorf("two kinds Kind() = %q, want \"\"", k)
	}
}
