package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// TestHistoryRetentionKey: history.retention defaults to
// controller.DefaultHistoryRetention, is read from the file and from
// AX_HISTORY_RETENTION, reaches controller.Config, is shown by
// --print-config, and a bad value is refused naming the key.
func TestHistoryRetentionKey(t *testing.T) {
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().History.Retention; got != controller.DefaultHistoryRetention {
		t.Errorf("default: %s, want %s", got, controller.DefaultHistoryRetention)
	}
	c, err = load(t, writeFile(t, "c.yaml", "history:\n  retention: 10m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().History.Retention; got != 10*time.Minute {
		t.Errorf("from the file: %s", got)
	}
	t.Setenv("AX_HISTORY_RETENTION", "36h")
	c, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.controllerConfig().History.Retention; got != 36*time.Hour {
		t.Errorf("from the environment: %s", got)
	}
	code, out, e := run(context.Background(), "serve", "--print-config")
	if code != 0 || !strings.Contains(out, "history:\n  retention: 36h0m0s") {
		t.Errorf("--print-config: %d %s %s", code, out, e)
	}
	t.Setenv("AX_HISTORY_RETENTION", "")
	for _, tc := range []struct{ content, want string }{
		{"history:\n  retention: 10s\n", "must be between 1m"},
		{"history:\n  retention: 720h\n", "AX_EVT keeps events"},
		{"history:\n  retention: forever\n", "not a duration"},
	} {
		_, err := load(t, writeFile(t, "c.yaml", tc.content))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "history.retention") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want ErrConfig naming history.retention (%s)", tc.content, err, tc.want)
		}
	}
}
