package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// durationKey is a duration config key for checkDurationKey.
type durationKey struct {
	key, env string                                // "history.retention", "AX_HISTORY_RETENTION"
	get      func(controller.Config) time.Duration // where it lands in controller.Config
	def      time.Duration                         // its default
	file     string                                // a file setting it to fromFile
	fromFile time.Duration
	envValue string // a value of env, printed by --print-config as printed
	fromEnv  time.Duration
	printed  string
	bad      []struct{ content, want string } // refused files and what their error says
}

// checkDurationKey: k defaults to k.def, is read from the file and from
// k.env, reaches controller.Config, is shown by --print-config, and each
// bad value is refused as ErrConfig naming the key.
func checkDurationKey(t *testing.T, k durationKey) {
	t.Helper()
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := k.get(c.controllerConfig()); got != k.def {
		t.Errorf("default: %s, want %s", got, k.def)
	}
	c, err = load(t, writeFile(t, "c.yaml", k.file))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.get(c.controllerConfig()); got != k.fromFile {
		t.Errorf("from the file: %s", got)
	}
	t.Setenv(k.env, k.envValue)
	c, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := k.get(c.controllerConfig()); got != k.fromEnv {
		t.Errorf("from the environment: %s", got)
	}
	code, out, e := run(context.Background(), "serve", "--print-config")
	if code != 0 || !strings.Contains(out, k.printed) {
		t.Errorf("--print-config: %d %s %s", code, out, e)
	}
	t.Setenv(k.env, "")
	for _, tc := range k.bad {
		_, err := load(t, writeFile(t, "c.yaml", tc.content))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), k.key) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want ErrConfig naming %s (%s)", tc.content, err, k.key, tc.want)
		}
	}
}

// TestHistoryRetentionKey: history.retention defaults to
// controller.DefaultHistoryRetention, is read from the file and from
// AX_HISTORY_RETENTION, reaches controller.Config, is shown by
// --print-config, and a bad value is refused naming the key.
func TestHistoryRetentionKey(t *testing.T) {
	checkDurationKey(t, durationKey{
		key: "history.retention", env: "AX_HISTORY_RETENTION",
		get:  func(c controller.Config) time.Duration { return c.History.Retention },
		def:  controller.DefaultHistoryRetention,
		file: "history:\n  retention: 10m\n", fromFile: 10 * time.Minute,
		envValue: "36h", fromEnv: 36 * time.Hour, printed: "history:\n  retention: 36h0m0s",
		bad: []struct{ content, want string }{
			{"history:\n  retention: 10s\n", "must be between 1m"},
			{"history:\n  retention: 720h\n", "AX_EVT keeps events"},
			{"history:\n  retention: forever\n", "not a duration"},
		},
	})
}

// TestReportsDedupWindowKey: reports.dedup_window defaults to
// controller.DefaultDedupWindow, is read from the file and from
// AX_REPORTS_DEDUP_WINDOW, reaches controller.Config, is shown by
// --print-config, and a bad value (out of 1m..24h, or longer than
// reports.max_age) is refused naming the key.
func TestReportsDedupWindowKey(t *testing.T) {
	checkDurationKey(t, durationKey{
		key: "reports.dedup_window", env: "AX_REPORTS_DEDUP_WINDOW",
		get:  func(c controller.Config) time.Duration { return c.Reports.DedupWindow },
		def:  controller.DefaultDedupWindow,
		file: "reports:\n  dedup_window: 10m\n", fromFile: 10 * time.Minute,
		envValue: "20m", fromEnv: 20 * time.Minute, printed: "  dedup_window: 20m0s",
		bad: []struct{ content, want string }{
			{"reports:\n  dedup_window: 30s\n", "must be between 1m0s and 24h0m0s"},
			{"reports:\n  dedup_window: 48h\n", "must be between 1m0s and 24h0m0s"},
			{"reports:\n  max_age: 1h\n  dedup_window: 2h\n", "at most reports.max_age"},
			{"reports:\n  dedup_window: soon\n", "not a duration"},
		},
	})
}

// TestForwardTimeoutKey: forward.timeout defaults to 5s, is read from
// the file and from AX_FORWARD_TIMEOUT, reaches controller.Config, is
// shown by --print-config, and a value out of 100ms..1m is refused naming
// the key.
func TestForwardTimeoutKey(t *testing.T) {
	checkDurationKey(t, durationKey{
		key: "forward.timeout", env: "AX_FORWARD_TIMEOUT",
		get:  func(c controller.Config) time.Duration { return c.Forward.Timeout },
		def:  5 * time.Second,
		file: "forward:\n  timeout: 2s\n", fromFile: 2 * time.Second,
		envValue: "750ms", fromEnv: 750 * time.Millisecond, printed: "forward:\n  timeout: 750ms",
		bad: []struct{ content, want string }{
			{"forward:\n  timeout: 10ms\n", "must be between 100ms and 1m0s"},
			{"forward:\n  timeout: 2m\n", "must be between 100ms and 1m0s"},
			{"forward:\n  timeout: -1s\n", "must be between"},
			{"forward:\n  timeout: later\n", "not a duration"},
		},
	})
}

// TestForwardHoldKey: forward.hold defaults to 30s, is read from the file
// and from AX_FORWARD_HOLD, reaches controller.Config, is shown by
// --print-config, and a value out of 1s..1h is refused naming the key.
func TestForwardHoldKey(t *testing.T) {
	checkDurationKey(t, durationKey{
		key: "forward.hold", env: "AX_FORWARD_HOLD",
		get:  func(c controller.Config) time.Duration { return c.Forward.Hold },
		def:  30 * time.Second,
		file: "forward:\n  hold: 1m\n", fromFile: time.Minute,
		envValue: "45s", fromEnv: 45 * time.Second, printed: "  hold: 45s",
		bad: []struct{ content, want string }{
			{"forward:\n  hold: 500ms\n", "must be between 1s and 1h0m0s"},
			{"forward:\n  hold: 2h\n", "must be between 1s and 1h0m0s"},
			{"forward:\n  hold: never\n", "not a duration"},
		},
	})
}
