package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse: no input panics; every error is a *FieldError wrapping
// ErrInvalidSpec; Validate agrees with Parse; an accepted schedule's Next is
// strictly after its argument and monotonic.
func FuzzParse(f *testing.F) {
	f.Add(false, "", "", "", "*/1 * * * *", "")
	f.Add(true, "", "", "", "", "")
	f.Add(false, "2026-12-01T02:00:00Z", "", "", "", "")
	f.Add(false, "", "30s", "", "", "")
	f.Add(false, "", "", "5m", "", "")
	f.Add(false, "", "", "", "0 2 * * *", "Europe/Berlin")
	f.Add(false, "", "", "", "@every 90s", "")
	f.Add(false, "", "", "", "TZ=UTC", "")
	f.Add(false, "", "", "", "0 0 30 2 *", "")
	f.Add(false, "", "", "1ms", "@daily", "Mars/Base")
	f.Fuzz(func(t *testing.T, asap bool, at, delay, every, cron, tz string) {
		spec := Spec{Asap: asap, At: at, Delay: delay, Every: every, Cron: cron, Timezone: tz}
		created := time.Date(2026, 5, 10, 10, 0, 30, 0, time.UTC)
		s, err := Parse(spec, created)
		verr := spec.Validate()
		if (err == nil) != (verr == nil) {
			t.Fatalf("Parse error %v but Validate error %v", err, verr)
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidSpec) || fe.Field == "" {
				t.Fatalf("error %v is not a *FieldError wrapping ErrInvalidSpec", err)
			}
			return
		}
		if spec.Kind() == "" {
			t.Fatalf("accepted spec has no Kind")
		}
		prev := created.Add(-time.Hour)
		for range 3 {
			n, ok := s.Next(prev)
			if !ok {
				break
			}
			if !n.After(prev) {
				t.Fatalf("Next(%v) = %v, not after", prev, n)
			}
			prev = n
		}
	})
}
