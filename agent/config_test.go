package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
)

func TestConfigValidateNamesTheKey(t *testing.T) {
	base := DefaultConfig()
	base.ID = "edge-1"
	base.DataDir = "/tmp/x"
	if err := base.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	tests := []struct {
		key string
		mod func(*Config)
	}{
		{"id", func(c *Config) { c.ID = "" }},
		{"id", func(c *Config) { c.ID = "bad id" }},
		{"labels", func(c *Config) { c.Labels = map[string]string{"": "x"} }},
		{"data_dir", func(c *Config) { c.DataDir = "relative" }},
		{"workers", func(c *Config) { c.Workers = 0 }},
		{"memory_limit_mib", func(c *Config) { c.MemoryLimitMiB = -1 }},
		{"release_pages_after", func(c *Config) { c.ReleasePagesAfter = 500 * time.Millisecond }},
		{"release_pages_after", func(c *Config) { c.ReleasePagesAfter = 25 * time.Hour }},
		{"release_pages_after", func(c *Config) { c.ReleasePagesAfter = -time.Second }},
		{"nats.url", func(c *Config) { c.NATS.URL = "" }},
		{"nats.ping_interval", func(c *Config) { c.NATS.PingInterval = 0 }},
		{"queue.size", func(c *Config) { c.Queue.Size = 1 }},
		{"queue.aging_step", func(c *Config) { c.Queue.AgingStep = -time.Second }},
		{"store.synchronous", func(c *Config) { c.Store.Synchronous = "off" }},
		{"clock.max_skew", func(c *Config) { c.Clock.MaxSkew = 0 }},
		{"clock.on_skew", func(c *Config) { c.Clock.OnSkew = "ignore" }},
		{"exec.allow[0]", func(c *Config) { c.Exec.Allow = []string{"bin/sh"} }},
		{"exec.permanent_exit_codes[0]", func(c *Config) { c.Exec.PermanentExitCodes = []int{0} }},
		{"exec.env_allow[0]", func(c *Config) { c.Exec.EnvAllow = []string{"LD_PRELOAD"} }},
		{"http.allow[0]", func(c *Config) { c.HTTP.Allow = []string{"ftp://x"} }},
		{"http.allow[0]", func(c *Config) { c.HTTP.Allow = []string{"http://allowed.example/?x=1"} }},
		{"outbox.window", func(c *Config) { c.Outbox.Window = 0 }},
		{"outbox.linger", func(c *Config) { c.Outbox.Linger = 2 * time.Second }},
		{"outbox.linger", func(c *Config) { c.Outbox.Linger = -time.Millisecond }},
		{"outbox.hold", func(c *Config) { c.Outbox.Hold = 6 * time.Second }},
		{"outbox.hold", func(c *Config) { c.Outbox.Hold = -time.Millisecond }},
		{"outbox.skipped_window", func(c *Config) { c.Outbox.SkippedWindow = 500 * time.Millisecond }},
		{"outbox.skipped_window", func(c *Config) { c.Outbox.SkippedWindow = 11 * time.Minute }},
		{"shutdown.grace", func(c *Config) { c.Shutdown.Grace = 0 }},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			c := base
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("Validate() = %v, want ErrConfig naming %s", err, tc.key)
			}
		})
	}
	if err := func() error { c := base; c.Clock.MaxSkew = 0; return c.Validate() }(); !strings.Contains(err.Error(), "clock.max_skew: must be > 0") {
		t.Fatalf("message = %v", err)
	}
}

func TestNewRefusesBadStore(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID = "edge-c"
	cfg.DataDir = t.TempDir()
	must(t, os.WriteFile(filepath.Join(cfg.DataDir, "agent.db"), []byte(strings.Repeat("garbage ", 100)), 0o600))
	if _, err := New(cfg, WithLogger(testLogger(t))); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("New on a corrupt store = %v, want ErrCorrupt", err)
	}
	// A store of another agent is refused too.
	cfg.DataDir = t.TempDir()
	a, err := New(cfg, WithLogger(testLogger(t)))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must(t, a.Run(ctx))
	cfg.ID = "edge-d"
	if _, err := New(cfg, WithLogger(testLogger(t))); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with another agent's store = %v, want ErrConfig", err)
	}
}

// TestConfigHandlerAllowlists: exec.env_allow and http.allow entries from a
// file are checked at load; the error names the key, the entry and why.
func TestConfigHandlerAllowlists(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"exec:\n  env_allow: [MODE, BASH_ENV]\n", `exec.env_allow[1]: "BASH_ENV" can make the command run other code`},
		{"exec:\n  env_allow: [PATH]\n", `exec.env_allow[0]: "PATH" can make the command run other code`},
		{"exec:\n  env_allow: [PERL5OPT]\n", `exec.env_allow[0]: "PERL5OPT" names starting with PERL`},
		{"exec:\n  env_allow: ['BASH_FUNC_x%%']\n", `exec.env_allow[0]: "BASH_FUNC_x%%" must be a plain variable name`},
		{"http:\n  allow: [allowed.example]\n", `http.allow[0]: "allowed.example" must start with http:// or https://`},
		{"http:\n  allow: ['https://a.example/', 'http://u@b.example/']\n", `http.allow[1]: "http://u@b.example/" must not have user info`},
		{"http:\n  allow: ['https://*.example/']\n", `http.allow[0]: "https://*.example/" wildcards are not supported`},
	} {
		cfg, err := LoadConfig(writeConfig(t, "id: edge-1\ndata_dir: /tmp/x\n"+tc.body), noEnv, nil)
		must(t, err)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: Validate() = %v, want ErrConfig containing %q", tc.body, err, tc.want)
		}
	}
	cfg, err := LoadConfig(writeConfig(t, "id: edge-1\ndata_dir: /tmp/x\nexec:\n  env_allow: [MODE, APP_LEVEL]\n"), envOf(map[string]string{}), nil)
	must(t, err)
	must(t, cfg.Validate())
	if want := []string{"MODE", "APP_LEVEL"}; !slices.Equal(cfg.Exec.EnvAllow, want) {
		t.Fatalf("exec.env_allow = %q, want %q", cfg.Exec.EnvAllow, want)
	}
	cfg, err = LoadConfig("", envOf(map[string]string{"AX_EXEC_ENV_ALLOW": "MODE, LD_PRELOAD"}), nil)
	must(t, err)
	cfg.ID = "edge-1"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `exec.env_allow[1]: "LD_PRELOAD"`) {
		t.Fatalf("AX_EXEC_ENV_ALLOW with LD_PRELOAD: Validate() = %v", err)
	}
}
