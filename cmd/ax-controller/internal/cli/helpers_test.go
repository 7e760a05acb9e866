package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
)

// syncBuf is a concurrency-safe output sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run executes one command line in-process.
func run(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb syncBuf
	code = Main(ctx, args, IO{Out: &out, Err: &errb}, Build{Version: "1.2.3", Commit: "abc123", Date: "2026-11-29"})
	return code, out.String(), errb.String()
}

// apiServer runs a real controller behind the API handler and returns its URL.
func apiServer(t *testing.T, tokens ...api.Token) string {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.Node = "t1"
	cfg.DataDir = t.TempDir()
	cfg.NATS.Port = -1
	ctrl, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctrl.Close() })
	if err := ctrl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Options{Backend: ctrl, Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
