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

	"github.com/spf13/cobra"
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
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ax-agent:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "ax-agent",
		Short:         "ax edge agent: register, trigger, execute, report",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "ax-agent %s (commit %s, built %s)\n", version, commit, date)
		},
	})
	return root
}
