package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/axsched/ax/agent"
)

func TestSampleConfigLoadsAndValidates(t *testing.T) {
	var o runOpts
	cfg, err := loadConfig("../../configs/ax-agent.yaml", newRunFlags(&o))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "edge-7" || cfg.Clock.OnSkew != agent.SkewRefuse || cfg.Queue.Size != 1024 || cfg.Store.Retention.String() != "24h0m0s" {
		t.Fatalf("unexpected config: %+v", cfg)
	}
}

func TestEnvAndFlagsOverride(t *testing.T) {
	t.Setenv("AX_CLOCK_MAX_SKEW", "7s")
	t.Setenv("AX_NATS_TOKEN", "s3cret")
	t.Setenv("AX_MEMORY_LIMIT_MIB", "16")
	var o runOpts
	fs := newRunFlags(&o)
	if err := fs.Parse([]string{"--id", "edge-9"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig("../../configs/ax-agent.yaml", fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clock.MaxSkew.String() != "7s" || cfg.ID != "edge-9" || cfg.NATS.Token != "s3cret" || cfg.MemoryLimitMiB != 16 {
		t.Fatalf("overrides not applied: skew %s id %s memory_limit_mib %d", cfg.Clock.MaxSkew, cfg.ID, cfg.MemoryLimitMiB)
	}
	var out bytes.Buffer
	if err := execute(context.Background(), []string{"run", "-c", "../../configs/ax-agent.yaml", "--print-config"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "*****") || !strings.Contains(out.String(), "max_skew: 7s") {
		t.Fatalf("secret not masked or override missing:\n%s", out.String())
	}
}

func TestValidationErrorNamesKey(t *testing.T) {
	t.Setenv("AX_CLOCK_MAX_SKEW", "0s")
	err := execute(context.Background(), []string{"run", "-c", "../../configs/ax-agent.yaml"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "clock.max_skew: must be > 0") {
		t.Fatalf("error = %v", err)
	}
}

func TestUnknownKeyRejected(t *testing.T) {
	f := t.TempDir() + "/bad.yaml"
	if err := writeFile(f, "id: edge-1\nclok:\n  max_skew: 1s\n"); err != nil {
		t.Fatal(err)
	}
	err := execute(context.Background(), []string{"run", "-c", f}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "clok") {
		t.Fatalf("error = %v, want it to name the unknown key", err)
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		wantOut string
	}{
		{"no command", nil, errUsage, "Usage:"},
		{"unknown command", []string{"serve"}, errUsage, "Usage:"},
		{"unknown flag", []string{"run", "--bogus"}, errUsage, ""},
		{"stray argument", []string{"run", "extra"}, errUsage, ""},
		{"help", []string{"help"}, nil, "--print-config"},
		{"version", []string{"version"}, nil, "ax-agent dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := execute(context.Background(), tc.args, &out)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("output lacks %q:\n%s", tc.wantOut, out.String())
			}
		})
	}
}
