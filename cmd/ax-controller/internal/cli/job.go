package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

func newJobCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Apply, list, inspect and control jobs",
		Args:  noArgs,
	}
	cmd.AddCommand(newJobApplyCmd(g), newJobLsCmd(g),
		newIDCmd(g, "get", "Show one job", (*client.Client).GetJob, printOne[protocol.Job]),
		newJobRmCmd(g),
		newIDCmd(g, "pause", "Pause a job: it stops firing until resumed", (*client.Client).PauseJob, printJob),
		newIDCmd(g, "resume", "Resume a paused job", (*client.Client).ResumeJob, printJob),
		newIDCmd(g, "trigger", "Run a job now, once, in addition to its schedule", (*client.Client).TriggerJob, printExecution))
	return cmd
}

func newJobLsCmd(g *globals) *cobra.Command {
	var f client.JobFilter
	var paused string
	var limit int
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List jobs",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			if paused != "" {
				p, err := strconv.ParseBool(paused)
				if err != nil {
					return fmt.Errorf("%w: --paused: must be true or false, got %q", ErrUsage, paused)
				}
				f.Paused = &p
			}
			if limit < 0 {
				return fmt.Errorf("%w: --limit: must not be negative", ErrUsage)
			}
			switch f.State = strings.ToLower(f.State); f.State {
			case "", "live", "retired":
			default:
				return fmt.Errorf("%w: --state: must be live or retired, got %q", ErrUsage, f.State)
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			jobs, err := c.AllJobs(cmd.Context(), f, limit)
			if err != nil {
				return err
			}
			return printJobs(g.io.Out, format, jobs)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Name, "name", "", "only jobs with this name")
	fl.StringVar(&f.Handler, "handler", "", "only jobs of this handler")
	fl.StringVar(&f.Agent, "agent", "", "only jobs pinned to this agent")
	fl.StringVar(&f.Group, "group", "", "only jobs targeting this group selector")
	fl.StringVar(&paused, "paused", "", "only paused (true) or active (false) jobs")
	fl.StringVar(&f.State, "state", "", "live (default) or retired: one-shot jobs that ended and left the live set (history)")
	fl.IntVar(&limit, "limit", 0, "show at most this many jobs (0: all)")
	return cmd
}

func newJobRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete jobs",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%w: want at least one job ID", ErrUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteJob(cmd.Context(), id); err != nil {
					return fmt.Errorf("%s: %w", id, err)
				}
				fmt.Fprintf(g.io.Out, "deleted %s\n", id)
			}
			return nil
		},
	}
}

// applyResult is one line of job apply's output.
type applyResult struct {
	Action string       `json:"action"` // created, updated, unchanged
	Source string       `json:"source"`
	Job    protocol.Job `json:"job"`
}

func newJobApplyCmd(g *globals) *cobra.Command {
	var files []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE...",
		Short: "Create or update jobs from YAML files (idempotent)",
		Long: "apply reads jobs from YAML files (one job, a list under jobs:, or several documents), " +
			"validates all of them first, then creates each job or updates the existing one: jobs are " +
			"matched by idempotency_key when set, else by name. Applying the same file twice changes nothing.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			if len(files) == 0 {
				return fmt.Errorf("%w: -f: at least one file is required", ErrUsage)
			}
			paths, err := expandJobPaths(files)
			if err != nil {
				return err
			}
			var jobs []FileJob
			for _, f := range paths {
				js, err := LoadJobFile(f)
				if err != nil {
					return err
				}
				jobs = append(jobs, js...)
			}
			if err := checkDuplicates(jobs); err != nil {
				return err
			}
			if dryRun {
				res := make([]applyResult, len(jobs))
				for i, fj := range jobs {
					res[i] = applyResult{Action: "valid", Source: fj.Source, Job: fj.Job}
				}
				return printApply(g, format, res)
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			res, err := applyAll(cmd.Context(), c, jobs)
			if err != nil {
				_ = printApply(g, format, res)
				return err
			}
			return printApply(g, format, res)
		},
	}
	cmd.Flags().StringSliceVarP(&files, "file", "f", nil, "job file (YAML) or directory of them; repeat or comma-separate for several")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only validate the files; contact no controller")
	return cmd
}

func printApply(g *globals, format string, res []applyResult) error {
	if format != "table" {
		if res == nil {
			res = []applyResult{}
		}
		return printValue(g.io.Out, format, res)
	}
	t := newTable(g.io.Out, "ACTION", "ID", "NAME", "SOURCE")
	for _, r := range res {
		t.row(r.Action, r.Job.ID, r.Job.Name, r.Source)
	}
	return t.flush()
}
