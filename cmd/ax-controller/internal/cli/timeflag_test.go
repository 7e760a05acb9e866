package cli

import (
	"errors"
	"testing"
	"time"
)

// TestParseTimeFlag: exec ls --from/--to take an RFC 3339 time or a
// duration before now; anything else is a usage error naming the flag.
func TestParseTimeFlag(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"2026-01-02T10:00:00Z": time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC),
		"2h":                   now.Add(-2 * time.Hour),
	} {
		got, err := parseTimeFlag("from", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTimeFlag(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-2h", "2026-01-02"} {
		if _, err := parseTimeFlag("to", in, now); !errors.Is(err, ErrUsage) {
			t.Errorf("parseTimeFlag(%q) = %v, want a usage error", in, err)
		}
	}
}
