// Command ax-agent is the ax edge agent: `ax-agent run --config
// configs/ax-agent.yaml`. Configuration comes from the YAML file, AX_*
// environment variables (AX_CLOCK_MAX_SKEW for clock.max_skew) and flags,
// in increasing order of precedence.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Set with -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = "none"
	date    = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := execute(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ax-agent:", err)
		stop()
		os.Exit(1)
	}
}
