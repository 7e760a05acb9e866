package cli

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// currentGCPercent reads the collector's target without changing it.
func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestStartControllerLeavesGCPercent: the start runs with the operator's
// collector target and leaves it as it was, GOGC=off included.
func TestStartControllerLeavesGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, before := range []int{150, -1} {
		debug.SetGCPercent(before)
		ctrl, err := controller.New(controller.Config{DataDir: t.TempDir(), NATS: controller.NATSConfig{Port: -1},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = startController(ctx, ctrl)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := currentGCPercent(); got != before {
			t.Errorf("GC percent after the start: %d, want %d (as before it)", got, before)
		}
		if err := ctrl.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
