package apitest

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/internal/testutil"
)

// Config returns a controller config for a test: node "t1", embedded NATS
// on a random port, its store in a new temporary directory of tb.
func Config(tb testing.TB) controller.Config {
	cfg := controller.DefaultConfig()
	cfg.Node = "t1"
	cfg.DataDir = tb.TempDir()
	cfg.NATS.Port = -1
	return cfg
}

// Start starts a controller with cfg (within a minute) and closes it when
// the test ends.
func Start(tb testing.TB, cfg controller.Config) *controller.Controller {
	tb.Helper()
	ctrl, err := controller.New(cfg)
	if err != nil {
		tb.Fatalf("controller.New: %v", err)
	}
	tb.Cleanup(func() { _ = ctrl.Close() })
	if err := ctrl.Start(testutil.Context(tb, 60*time.Second)); err != nil {
		tb.Fatalf("controller Start: %v", err)
	}
	return ctrl
}

// Serve starts a controller with cfg and serves the API over it with
// tokens (none: no auth); both stop when the test ends.
func Serve(tb testing.TB, cfg controller.Config, tokens ...api.Token) (*httptest.Server, *controller.Controller) {
	tb.Helper()
	ctrl := Start(tb, cfg)
	h, err := api.NewHandler(api.Options{Backend: ctrl, Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv, ctrl
}
