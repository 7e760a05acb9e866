package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/axsched/ax/agent"
)

const usage = `ax-agent: ax edge agent: register, trigger, execute, report

Usage:
  ax-agent run [flags]   run the agent
  ax-agent version       print the version
  ax-agent help          print this help

Flags of run:
`

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

// execute runs the command line args (without the program name). The
// agent binary uses pflag directly (no command framework): two commands do
// not need one, and the binary stays within its size budget.
func execute(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		printUsage(out)
		return fmt.Errorf("%w: a command is required (run, version, help)", errUsage)
	}
	switch args[0] {
	case "run":
		return runAgent(ctx, args[1:], out)
	case "version", "--version":
		_, err := fmt.Fprintf(out, "ax-agent %s (commit %s, built %s)\n", version, commit, date)
		return err
	case "help", "-h", "--help":
		printUsage(out)
		return nil
	default:
		printUsage(out)
		return fmt.Errorf("%w: unknown command %q (run, version, help)", errUsage, args[0])
	}
}

func printUsage(out io.Writer) {
	fmt.Fprint(out, usage)
	var o runOpts
	fs := newRunFlags(&o)
	fs.SetOutput(out)
	fs.PrintDefaults()
}

// runOpts are the flags of run that are not config keys.
type runOpts struct {
	cfgFile     string
	printConfig bool
}

// newRunFlags declares the flags of run; the config-key flags (flagKeys)
// override the file and the environment when set.
func newRunFlags(o *runOpts) *pflag.FlagSet {
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	f.StringVarP(&o.cfgFile, "config", "c", "", "YAML config file")
	f.BoolVar(&o.printConfig, "print-config", false, "print the effective config (secrets masked) and exit")
	f.String("id", "", "agent id (id)")
	f.String("nats-url", "", "NATS URL (nats.url)")
	f.String("data-dir", "", "data directory (data_dir)")
	f.Int("workers", 0, "handler workers (workers)")
	f.String("log-format", "", "json or text (log.format)")
	f.String("log-level", "", "debug, info, warn, error (log.level)")
	return f
}

func runAgent(ctx context.Context, args []string, out io.Writer) error {
	var o runOpts
	fs := newRunFlags(&o)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: run: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: run: unexpected arguments %q", errUsage, fs.Args())
	}
	cfg, err := loadConfig(o.cfgFile, fs)
	if err != nil {
		return err
	}
	if o.printConfig {
		return writeMasked(cfg, out)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// A soft limit on the Go heap keeps the resident set small on small
	// devices (GOMEMLIMIT, if set, wins).
	if cfg.MemoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
	}
	log := agent.NewLogger(cfg.Log, os.Stderr)
	a, err := agent.New(cfg, agent.WithVersion(version), agent.WithLogger(log))
	if err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	// Start-up's code, run once, need not stay resident (internal/binpages).
	relCtx, stopRel := context.WithCancel(ctx)
	defer stopRel()
	go releasePagesLater(relCtx, cfg.ReleasePagesAfter, log.With("agent", cfg.ID))
	return a.Run(ctx)
}
