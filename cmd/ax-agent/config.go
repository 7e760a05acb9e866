package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/agent"
)

// flagKeys maps flags to config keys.
var flagKeys = map[string]string{
	"id": "id", "nats-url": "nats.url", "data-dir": "data_dir", "workers": "workers",
	"log-format": "log.format", "log-level": "log.level",
}

// loadConfig builds the effective config: defaults, then the YAML file,
// then AX_* environment variables, then the config flags set on the command
// line. The agent reads its config with agent.LoadConfig, not viper: viper
// and what it pulls in cost about 1 MB, which the 12 MiB binary budget
// (docs/architecture.md: Budgets) does not allow.
func loadConfig(file string, flags *pflag.FlagSet) (agent.Config, error) {
	set := make(map[string]string)
	for flag, key := range flagKeys {
		if f := flags.Lookup(flag); f != nil && f.Changed {
			set[key] = f.Value.String()
		}
	}
	return agent.LoadConfig(file, os.LookupEnv, set)
}

// writeMasked writes the effective config as YAML with secrets masked.
func writeMasked(cfg agent.Config, out io.Writer) error {
	enc := yaml.NewEncoder(out)
	enc.SetIndent(2)
	if err := enc.Encode(cfg.Masked()); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return enc.Close()
}
