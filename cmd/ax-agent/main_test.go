package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/axsched/ax/agent"
)

func TestSampleConfigLoadsAndValidates(t *testing.T) {
	cmd := newRunCmd()
	v, err := loadViper("../../configs/ax-agent.yaml", cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decodeConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "edge-7" || cfg.Clock.OnSkew != agent.SkewRefuse || cfg.Queue.Size != 1024 {
		t.Fatalf("unexpected config: %+v", cfg)
	}
}

func TestEnvAndFlagsOverride(t *testing.T) {
	t.Setenv("AX_CLOCK_MAX_SKEW", "7s")
	t.Setenv("AX_NATS_TOKEN", "s3cret")
	cmd := newRunCmd()
	if err := cmd.Flags().Parse([]string{"--id", "edge-9"}); err != nil {
		t.Fatal(err)
	}
	v, err := loadViper("../../configs/ax-agent.yaml", cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decodeConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clock.MaxSkew.String() != "7s" || cfg.ID != "edge-9" || cfg.NATS.Token != "s3cret" {
		t.Fatalf("overrides not applied: skew %s id %s", cfg.Clock.MaxSkew, cfg.ID)
	}
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"run", "-c", "../../configs/ax-agent.yaml", "--print-config"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "*****") {
		t.Fatalf("secret not masked:\n%s", out.String())
	}
}

func TestValidationErrorNamesKey(t *testing.T) {
	t.Setenv("AX_CLOCK_MAX_SKEW", "0s")
	root := newRoot()
	root.SetArgs([]string{"run", "-c", "../../configs/ax-agent.yaml"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "clock.max_skew: must be > 0") {
		t.Fatalf("error = %v", err)
	}
}

func TestUnknownKeyRejected(t *testing.T) {
	f := t.TempDir() + "/bad.yaml"
	if err := writeFile(f, "id: edge-1\nclok:\n  max_skew: 1s\n"); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	root.SetArgs([]string{"run", "-c", f})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "clok") {
		t.Fatalf("error = %v, want it to name the unknown key", err)
	}
}
