package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/agent"
)

func newRunCmd() *cobra.Command {
	var cfgFile string
	var printConfig bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the agent",
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := loadViper(cfgFile, cmd.Flags())
			if err != nil {
				return err
			}
			if printConfig {
				out, err := yaml.Marshal(maskedSettings(v))
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			cfg, err := decodeConfig(v)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			a, err := agent.New(cfg, agent.WithVersion(version))
			if err != nil {
				return fmt.Errorf("start agent: %w", err)
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfgFile, "config", "c", "", "YAML config file")
	f.BoolVar(&printConfig, "print-config", false, "print the effective config (secrets masked) and exit")
	f.String("id", "", "agent id (id)")
	f.String("nats-url", "", "NATS URL (nats.url)")
	f.String("data-dir", "", "data directory (data_dir)")
	f.Int("workers", 0, "handler workers (workers)")
	f.String("log-format", "", "json or text (log.format)")
	f.String("log-level", "", "debug, info, warn, error (log.level)")
	return cmd
}
