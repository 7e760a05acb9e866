package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/pkg/protocol"
)

// newAgentLabelCmd is `agent label <id> k=v ... k-`: it sets and removes
// labels of an agent on the controller, whose copy is the only one that
// counts (an agent's registration cannot change it), and the controller
// places the agent in its new groups at once.
func newAgentLabelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "label <id> k=v... [k-...]",
		Short: "Set (k=v) and remove (k-) labels of an agent; its group jobs follow at once",
		Long: "label changes the labels the controller holds for agent <id>: k=v sets a label, k- removes it. " +
			"These labels, set at enroll and changed only here, decide the agent's groups; the labels in the " +
			"agent's own config are ignored once the controller has labels for it.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("%w: want <id> and at least one k=v or k-, got %d argument(s)", ErrUsage, len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			id := args[0]
			if err := protocol.ValidateName("id", id); err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
			ch, err := parseLabelChange(args[1:])
			if err != nil {
				return err
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.LabelAgent(cmd.Context(), id, ch)
			if err != nil {
				return err
			}
			if format != "table" {
				return printValue(g.io.Out, format, a)
			}
			labels := labelsText(a.Labels)
			if labels == "" {
				labels = "(none)"
			}
			_, err = fmt.Fprintf(g.io.Out, "agent %s labels: %s\n", id, labels)
			return err
		},
	}
}

// parseLabelChange reads "k=v" (set) and "k-" (remove) arguments.
func parseLabelChange(args []string) (protocol.LabelChange, error) {
	var ch protocol.LabelChange
	for _, a := range args {
		if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
			ch.Remove = append(ch.Remove, k)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return ch, fmt.Errorf("%w: %q is neither k=v (set) nor k- (remove)", ErrUsage, a)
		}
		if ch.Set == nil {
			ch.Set = map[string]string{}
		}
		if _, dup := ch.Set[k]; dup {
			return ch, fmt.Errorf("%w: label %q given twice", ErrUsage, k)
		}
		ch.Set[k] = v
	}
	if err := ch.Validate(); err != nil {
		return ch, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return ch, nil
}
