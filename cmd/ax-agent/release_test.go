package main

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestReleasePagesLater(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binary pages are released on Linux only")
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	releasePagesLater(context.Background(), time.Millisecond, log)
	out := buf.String()
	if !strings.Contains(out, "binary pages released") || strings.Contains(out, "mappings=0 ") {
		t.Fatalf("log = %q, want a release of at least one mapping", out)
	}
}

func TestReleasePagesLaterStopsWithItsContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	releasePagesLater(ctx, time.Hour, log)
	releasePagesLater(context.Background(), 0, log)
	if buf.Len() != 0 {
		t.Fatalf("log = %q, want nothing released", buf.String())
	}
}
