package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// TestReportsKeys: reports.max_bytes, reports.max_per_subject and
// reports.max_age (the bounds of
// AX_RPT) default to controller.DefaultConfig's, are read from the file and
// from AX_REPORTS_*, reach controller.Config, and a bad value is refused
// naming the key.
func TestReportsKeys(t *testing.T) {
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := controller.DefaultConfig().Reports; c.controllerConfig().Reports != d {
		t.Errorf("defaults: %+v, want %+v", c.controllerConfig().Reports, d)
	}
	c, err = load(t, writeFile(t, "c.yaml", "reports:\n  max_bytes: 2097152\n  max_per_subject: 500\n  max_age: 2h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().Reports; got.MaxBytes != 2<<20 || got.MaxPerSubject != 500 || got.MaxAge != 2*time.Hour {
		t.Errorf("from the file: %+v", got)
	}
	t.Setenv("AX_REPORTS_MAX_BYTES", "3145728")
	t.Setenv("AX_REPORTS_MAX_AGE", "3h")
	c, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().Reports; got.MaxBytes != 3<<20 || got.MaxAge != 3*time.Hour {
		t.Errorf("from the environment: %+v", got)
	}
	for _, tc := range []struct{ content, key, want string }{
		{"reports:\n  max_bytes: 1000\n", "reports.max_bytes", "at least 1048576"},
		{"reports:\n  max_bytes: lots\n", "reports.max_bytes", "integer"},
		{"reports:\n  max_per_subject: 10\n", "reports.max_per_subject", "at least 64"},
		{"reports:\n  max_per_subject: -1\n", "reports.max_per_subject", "out of range"},
		{"reports:\n  max_age: 5m\n", "reports.max_age", "at least 1h"},
		{"reports:\n  max_age: forever\n", "reports.max_age", "not a duration"},
	} {
		t.Setenv("AX_REPORTS_MAX_BYTES", "")
		t.Setenv("AX_REPORTS_MAX_AGE", "")
		_, err := load(t, writeFile(t, "c.yaml", tc.content))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want ErrConfig naming %s (%s)", tc.content, err, tc.key, tc.want)
		}
	}
}
