package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

// newIDCmd makes a client command that takes one ID, calls the API with it
// and prints the answer: `job get|pause|resume|trigger`, `exec get|retry|cancel`.
func newIDCmd[T any](g *globals, use, short string, call func(*client.Client, context.Context, string) (T, error), print func(io.Writer, string, T) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ID",
		Short: short,
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			v, err := call(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return print(g.io.Out, format, v)
		},
	}
}

// printOne shows one object: YAML in place of a table.
func printOne[T any](w io.Writer, format string, v T) error {
	if format == "table" {
		format = "yaml"
	}
	return printValue(w, format, v)
}

// printJob shows one job as a one-row table (or JSON/YAML).
func printJob(w io.Writer, format string, j protocol.Job) error {
	return printJobs(w, format, []protocol.Job{j})
}

// printExecution shows one execution as a one-row table (or JSON/YAML).
func printExecution(w io.Writer, format string, e protocol.Execution) error {
	return printExecutions(w, format, []protocol.Execution{e})
}
