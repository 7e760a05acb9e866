package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/client"
)

// Build identifies the binary; main stamps it with -ldflags -X.
type Build struct {
	Version, Commit, Date string
}

// IO are the streams a command line writes to.
type IO struct {
	Out, Err io.Writer
}

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Main runs one ax-controller command line and returns its exit code.
// Errors are printed to streams.Err as "error: <field>: <reason>".
func Main(ctx context.Context, args []string, streams IO, build Build) int {
	root := NewRoot(streams, build)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(streams.Err, "error: %s\n", errorText(err))
	if errors.Is(err, ErrUsage) {
		fmt.Fprintf(streams.Err, "run 'ax-controller --help' for usage\n")
		return ExitUsage
	}
	return ExitError
}

// errorText strips sentinel prefixes that say nothing to an operator, so
// that a bad key reads "lease_ttl: must be ..." whether this package or
// controller.Config.Validate refused it.
func errorText(err error) string {
	s := err.Error()
	for _, p := range []string{ErrConfig.Error() + ": ", controller.ErrConfig.Error() + ": ", ErrUsage.Error() + ": "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// globals are the flags every command shares.
type globals struct {
	io      IO
	build   Build
	config  string
	apiURL  string
	token   string
	caFile  string
	output  string
	timeout time.Duration
}

// NewRoot returns the ax-controller command tree.
func NewRoot(streams IO, build Build) *cobra.Command {
	g := &globals{io: streams, build: build}
	root := &cobra.Command{
		Use:   "ax-controller",
		Short: "ax controller: scheduling state machine, retries, leases, HTTP API and operator CLI",
		Long: "ax-controller runs the ax controller (serve) and operates it through its HTTP API " +
			"(job, exec, agent). Configuration: --config YAML file, AX_* environment variables, flags.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", ErrUsage, err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.config, "config", "", "YAML config file (see configs/ax-controller.yaml)")
	pf.StringVar(&g.apiURL, "api", "", "API base URL for client commands (env AX_API_URL, default "+DefaultAPIURL+")")
	pf.StringVar(&g.token, "token", "", "bearer token for client commands (env AX_API_TOKEN)")
	pf.StringVar(&g.caFile, "ca-file", "", "PEM CA bundle that signs the API's certificate, for an https --api with a private CA (env AX_API_CA_FILE)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	pf.DurationVar(&g.timeout, "timeout", client.DefaultTimeout, "timeout of each API request")

	root.AddCommand(newServeCmd(g), newJobCmd(g), newExecCmd(g), newAgentCmd(g), newVersionCmd(g))
	return root
}

// outputFormat validates -o.
func (g *globals) outputFormat() (string, error) {
	switch g.output {
	case "table", "json", "yaml":
		return g.output, nil
	}
	return "", fmt.Errorf("%w: -o/--output: must be table, json or yaml, got %q", ErrUsage, g.output)
}

// client builds an API client from --api/--token/--ca-file,
// AX_API_URL/AX_API_TOKEN/AX_API_CA_FILE.
func (g *globals) client(cmd *cobra.Command) (*client.Client, error) {
	v, err := newViper("", cmd.Flags(), map[string]string{"api": "client.api_url", "token": "client.token", "ca-file": "client.ca_file"})
	if err != nil {
		return nil, err
	}
	if err := v.BindEnv("client.api_url", "AX_API_URL"); err != nil {
		return nil, err
	}
	if err := v.BindEnv("client.token", "AX_API_TOKEN"); err != nil {
		return nil, err
	}
	if err := v.BindEnv("client.ca_file", "AX_API_CA_FILE"); err != nil {
		return nil, err
	}
	v.SetDefault("client.api_url", DefaultAPIURL)
	if g.timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout: must be positive", ErrUsage)
	}
	hc := newHTTPClient(g.timeout)
	if err := useCAFile(hc, v.GetString("client.api_url"), v.GetString("client.ca_file")); err != nil {
		return nil, err
	}
	c, err := client.New(v.GetString("client.api_url"), v.GetString("client.token"),
		client.WithHTTPClient(hc), client.WithUserAgent("ax-controller/"+g.build.Version))
	if err != nil {
		return nil, fmt.Errorf("%w: --api: %v", ErrConfig, err)
	}
	return c, nil
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%w: want %d argument(s) %s, got %d", ErrUsage, n, strings.Join(names, " "), len(args))
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, args[0])
	}
	return nil
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			info := map[string]string{"version": g.build.Version, "commit": g.build.Commit, "date": g.build.Date}
			if format == "table" {
				_, err := fmt.Fprintf(g.io.Out, "ax-controller %s (commit %s, built %s)\n", g.build.Version, g.build.Commit, g.build.Date)
				return err
			}
			return printValue(g.io.Out, format, info)
		},
	}
}
