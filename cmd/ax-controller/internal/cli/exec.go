package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

func newExecCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec",
		Short: "List, inspect, retry, cancel and watch executions",
		Args:  noArgs,
	}
	cmd.AddCommand(newExecLsCmd(g),
		newIDCmd(g, "get", "Show one execution", (*client.Client).GetExecution, printOne[protocol.Execution]),
		newIDCmd(g, "retry", "Run a new attempt of a finished execution", (*client.Client).RetryExecution, printExecution),
		newIDCmd(g, "cancel", "Cancel an execution that has not finished", (*client.Client).CancelExecution, printExecution),
		newExecWatchCmd(g))
	return cmd
}

// parseState accepts a state in any case ("failed", "FAILED").
func parseState(flag, s string) (protocol.State, error) {
	if s == "" {
		return "", nil
	}
	st := protocol.State(strings.ToUpper(s))
	if !st.Valid() {
		names := make([]string, len(protocol.States))
		for i, v := range protocol.States {
			names[i] = string(v)
		}
		return "", fmt.Errorf("%w: --%s: unknown state %q (one of %s)", ErrUsage, flag, s, strings.Join(names, ", "))
	}
	return st, nil
}

// parseTimeFlag accepts an RFC 3339 time or a duration before now ("2h").
func parseTimeFlag(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: --%s: %q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration ago (2h)", ErrUsage, flag, s)
}

func newExecLsCmd(g *globals) *cobra.Command {
	var f client.ExecFilter
	var state, from, to string
	var limit int
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List executions",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			if f.State, err = parseState("state", state); err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("%w: --limit: must not be negative", ErrUsage)
			}
			now := time.Now()
			if f.From, err = parseTimeFlag("from", from, now); err != nil {
				return err
			}
			if f.To, err = parseTimeFlag("to", to, now); err != nil {
				return err
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			execs, err := c.AllExecutions(cmd.Context(), f, limit)
			if err != nil {
				return err
			}
			return printExecutions(g.io.Out, format, execs)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&state, "state", "", "only executions in this state (PENDING, RUNNING, FAILED, ...)")
	fl.StringVar(&f.JobID, "job", "", "only executions of this job id")
	fl.StringVar(&f.Agent, "agent", "", "only executions on this agent")
	fl.StringVar(&from, "from", "", "only executions scheduled at or after this time (RFC 3339, or a duration ago: 2h)")
	fl.StringVar(&to, "to", "", "only executions scheduled before this time (RFC 3339, or a duration ago: 30m)")
	fl.IntVar(&limit, "limit", 100, "show at most this many executions (0: all)")
	return cmd
}

func newAgentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Inspect, enroll, revoke and label agents",
		Args:  noArgs,
	}
	cmd.AddCommand(newAgentLsCmd(g))
	cmd.AddCommand(newAgentEnrollCmd(g), newAgentRevokeCmd(g), newAgentLabelCmd(g))
	return cmd
}

// newAgentLsCmd lists agents, filtered by label selector, online state and
// version, all of them or the first --limit; --count prints only the
// counts per state.
func newAgentLsCmd(g *globals) *cobra.Command {
	var f client.AgentFilter
	var online string
	var limit int
	var count bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the agents the controller knows",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			if online != "" {
				b, err := strconv.ParseBool(online)
				if err != nil {
					return fmt.Errorf("%w: --online: must be true or false, got %q", ErrUsage, online)
				}
				f.Online = &b
			}
			if limit < 0 {
				return fmt.Errorf("%w: --limit: must not be negative, got %d", ErrUsage, limit)
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			if count {
				f.Limit = 1
				p, err := c.ListAgentPage(cmd.Context(), f)
				if err != nil {
					return err
				}
				if format != "table" {
					return printValue(g.io.Out, format, p.Counts)
				}
				_, err = fmt.Fprintf(g.io.Out, "total %d  online %d  offline %d  revoked %d  no-commands %d\n",
					p.Counts.Total, p.Counts.Online, p.Counts.Offline, p.Counts.Revoked, p.Counts.NoCommands)
				return err
			}
			f.Limit = 1000
			if limit > 0 && limit < 1000 {
				f.Limit = limit
			}
			agents, err := c.AllAgents(cmd.Context(), f, limit)
			if err != nil {
				return err
			}
			return printAgents(g.io.Out, format, agents)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Label, "label", "", "only agents whose labels match this selector (site=a,role=pump)")
	fl.StringVar(&online, "online", "", "only online (true) or offline (false) agents")
	fl.StringVar(&f.Version, "version", "", "only agents of this version")
	fl.IntVar(&limit, "limit", 0, "list at most this many agents (0: all)")
	fl.StringVar(&f.After, "after", "", "start after this agent id")
	fl.BoolVar(&count, "count", false, "print only the counts per state")
	return cmd
}
