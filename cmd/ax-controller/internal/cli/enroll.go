package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// newAgentEnrollCmd is `agent enroll <id> -o <file>`: it asks the
// controller for a new NATS identity of the agent and writes the seed to
// <file> with mode 0600. The local -o/--output shadows the global output
// format: here it names the seed file ("-" writes the seed to stdout).
func newAgentEnrollCmd(g *globals) *cobra.Command {
	var out, labels string
	var label []string
	var rotate, force bool
	cmd := &cobra.Command{
		Use:   "enroll <id> -o <file>",
		Short: "Issue an agent its NATS identity (needs nats.auth: nkeys) and write its seed file",
		Long: "enroll creates agent <id>'s NKey user on the controller's embedded NATS server, limited to " +
			"the agent's own subjects, and writes the seed to -o <file> (mode 0600). The seed is shown once " +
			"and kept nowhere else; give the file to the agent as nats.creds. --rotate replaces the key of " +
			"an enrolled agent (its current connection is closed). --label k=v sets the agent's labels, which " +
			"decide its groups: the labels in the agent's own config do not (change them with agent label); " +
			"without --label a rotation keeps the labels the controller has.",
		Args: exactArgs(1, "<id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := protocol.ValidateName("id", id); err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
			if out == "" {
				return fmt.Errorf("%w: -o/--output: the seed file is required (\"-\" for stdout)", ErrUsage)
			}
			req := auth.EnrollRequest{Rotate: rotate}
			var err error
			if req.Labels, err = parseLabels(labels, label); err != nil {
				return err
			}
			if out != "-" {
				if err := checkSeedTarget(out, force); err != nil {
					return err
				}
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			en, err := c.EnrollAgent(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			data := auth.SeedFile("ax agent "+id, []byte(en.Seed))
			if out == "-" {
				_, err := g.io.Out.Write(data)
				fmt.Fprintf(g.io.Err, "enrolled agent %s (public key %s)\n", id, en.PublicKey)
				return err
			}
			if err := auth.WriteSecretFile(out, data); err != nil {
				return fmt.Errorf("agent %s is enrolled but its seed could not be written (run again with --rotate): %w", id, err)
			}
			_, err = fmt.Fprintf(g.io.Out, "enrolled agent %s (public key %s); seed written to %s (mode 0600)\n"+
				"give it to the agent as nats.creds: %s\n", id, en.PublicKey, out, filepath.Base(out))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", "seed file to write (mode 0600); - for stdout")
	fl.StringArrayVar(&label, "label", nil, "a label of the agent, k=v (repeatable); the controller's labels decide its groups")
	fl.StringVar(&labels, "labels", "", "labels of the agent, k=v,k2=v2 (same as several --label)")
	fl.BoolVar(&rotate, "rotate", false, "replace the key of an enrolled agent")
	fl.BoolVar(&force, "force", false, "overwrite an existing seed file")
	return cmd
}

// newAgentRevokeCmd is `agent revoke <id>`.
func newAgentRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <id>",
		Short: "Remove an agent's NATS identity: its connection is closed and it cannot reconnect",
		Args:  exactArgs(1, "<id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			if err := protocol.ValidateName("id", args[0]); err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
			c, err := g.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.RevokeAgent(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format != "table" {
				return printValue(g.io.Out, format, a)
			}
			_, err = fmt.Fprintf(g.io.Out, "revoked agent %s (public key %s)\n", a.ID, a.PublicKey)
			return err
		},
	}
}

// parseLabels reads --labels "k=v,k2=v2" and each --label "k=v"; nil when
// neither is given (a rotation then keeps the agent's labels).
func parseLabels(s string, each []string) (map[string]string, error) {
	var kvs []string
	if strings.TrimSpace(s) != "" {
		kvs = strings.Split(s, ",")
	}
	kvs = append(kvs, each...)
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: --label: %q is not k=v", ErrUsage, kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%w: --label: %q given twice", ErrUsage, k)
		}
		m[k] = v
	}
	if err := protocol.ValidateLabels("--label", m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return m, nil
}

// checkSeedTarget refuses to overwrite a file (unless force) and checks,
// before the identity is issued, that the directory takes a new file.
func checkSeedTarget(path string, force bool) error {
	if _, err := os.Stat(path); err == nil && !force {
		return fmt.Errorf("%w: -o/--output: %s exists (use --force to overwrite)", ErrUsage, path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("-o/--output: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".ax-enroll-check-*")
	if err != nil {
		return fmt.Errorf("-o/--output: cannot write to %s: %w", filepath.Dir(path), err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// watchCreds is the credentials file of exec watch: nats.creds_file, or,
// for the embedded server with nats.auth: nkeys, the controller's own seed
// under data_dir (watch runs on the controller's host then).
func watchCreds(v *viper.Viper) string {
	if c := v.GetString("nats.creds_file"); c != "" {
		return c
	}
	if v.GetString("nats.url") == "" && strings.EqualFold(v.GetString("nats.auth"), auth.ModeNKeys) {
		return filepath.Join(v.GetString("data_dir"), controller.AuthDir, auth.ControllerSeedFile)
	}
	return ""
}
