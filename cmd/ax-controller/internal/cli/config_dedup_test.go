package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// TestReportsDedupWindowKey: reports.dedup_window defaults to
// controller.DefaultDedupWindow, is read from the file and from
// AX_REPORTS_DEDUP_WINDOW, reaches controller.Config, is shown by
// --print-config, and a bad value (out of 1m..24h, or longer than
// reports.max_age) is refused naming the key.
func TestReportsDedupWindowKey(t *testing.T) {
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().Reports.DedupWindow; got != controller.DefaultDedupWindow {
		t.Errorf("default: %s, want %s", got, controller.DefaultDedupWindow)
	}
	c, err = load(t, writeFile(t, "c.yaml", "reports:\n  dedup_window: 10m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().Reports.DedupWindow; got != 10*time.Minute {
		t.Errorf("from the file: %s", got)
	}
	t.Setenv("AX_REPORTS_DEDUP_WINDOW", "20m")
	c, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().Reports.DedupWindow; got != 20*time.Minute {
		t.Errorf("from the environment: %s", got)
	}
	code, out, e := run(context.Background(), "serve", "--print-config")
	if code != 0 || !strings.Contains(out, "  dedup_window: 20m0s") {
		t.Errorf("--print-config: %d %s %s", code, out, e)
	}
	t.Setenv("AX_REPORTS_DEDUP_WINDOW", "")
	for _, tc := range []struct{ content, want string }{
		{"reports:\n  dedup_window: 30s\n", "must be between 1m0s and 24h0m0s"},
		{"reports:\n  dedup_window: 48h\n", "must be between 1m0s and 24h0m0s"},
		{"reports:\n  max_age: 1h\n  dedup_window: 2h\n", "at most reports.max_age"},
		{"reports:\n  dedup_window: soon\n", "not a duration"},
	} {
		_, err := load(t, writeFile(t, "c.yaml", tc.content))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "reports.dedup_window") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want ErrConfig naming reports.dedup_window (%s)", tc.content, err, tc.want)
		}
	}
}
