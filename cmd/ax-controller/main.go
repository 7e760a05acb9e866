package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/axsched/ax/cmd/ax-controller/internal/cli"
)

// Stamped at build time: -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = "none"
	date    = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}, cli.Build{Version: version, Commit: commit, Date: date})
	stop()
	os.Exit(code)
}
