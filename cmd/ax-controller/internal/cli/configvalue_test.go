package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
)

// configKey returns the key a config error names (this package's keys or
// the controller's) and whether err is one.
func configKey(err error) (string, bool) {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Key, true
	}
	var cc *controller.ConfigError
	if errors.As(err, &cc) {
		return cc.Key, true
	}
	return "", false
}

// TestConfigValuesNotCoerced: a value of the wrong form is refused naming
// the key and the value given, never rounded, wrapped or replaced by the
// default.
func TestConfigValuesNotCoerced(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, content string
		env           map[string]string
		key, given    string
	}{
		{"shards with a fraction", "shards: 1.5\n", nil, "shards", "1.5"},
		{"shards with a fraction, env", "", map[string]string{"AX_SHARDS": "1.5"}, "shards", `"1.5"`},
		{"shards oversize", "shards: 99999999999999999999\n", nil, "shards", "99999999999999999999"},
		{"shards oversize, env", "", map[string]string{"AX_SHARDS": "99999999999999999999"}, "shards", "99999999999999999999"},
		{"shards over int32", "shards: 4294967296\n", nil, "shards", "4294967296"},
		{"shards zero", "shards: 0\n", nil, "shards", "0"},
		{"shards as text", "shards: many\n", nil, "shards", "many"},
		{"heartbeat zero", "heartbeat_interval: 0s\n", nil, "heartbeat_interval", "0s"},
		{"heartbeat zero, env", "", map[string]string{"AX_HEARTBEAT_INTERVAL": "0s"}, "heartbeat_interval", "0s"},
		{"lease ttl zero", "lease_ttl: 0s\n", nil, "lease_ttl", "0s"},
		{"renew zero", "lease_renew_interval: 0ms\n", nil, "lease_renew_interval", "0ms"},
		{"ack wait zero", "ack_wait: 0s\n", nil, "ack_wait", "0s"},
		{"offline zero", "agent_offline_after: 0s\n", nil, "agent_offline_after", "0s"},
		{"port zero", "nats:\n  port: 0\n", nil, "nats.port", "0"},
		{"port with a fraction", "nats:\n  port: 4222.5\n", nil, "nats.port", "4222.5"},
		{"replicas zero", "nats:\n  replicas: 0\n", nil, "nats.replicas", "0"},
		{"verify_clients a number", "nats:\n  tls:\n    verify_clients: 1\n", nil, "nats.tls.verify_clients", "1"},
		{"node a list", "node: [a, b]\n", nil, "node", "[a b]"},
		{"data_dir a file", "data_dir: " + file + "\n", nil, "data_dir", file},
		{"data_dir below a file", "data_dir: " + file + "/sub\n", nil, "data_dir", file},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			path := ""
			if tc.content != "" {
				path = writeFile(t, "c.yaml", tc.content)
			}
			_, err := load(t, path)
			key, ok := configKey(err)
			if !ok || !errors.Is(err, ErrConfig) || key != tc.key {
				t.Fatalf("err = %v, want a config error on %s", err, tc.key)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.given) {
				t.Errorf("err = %v, does not show the value given %s", err, tc.given)
			}
		})
	}
	// Whole numbers written as floats, and strings from the environment,
	// are values, not errors.
	t.Setenv("AX_NATS_REPLICAS", "1")
	c, err := load(t, writeFile(t, "c.yaml", "shards: 8.0\nnats:\n  port: 4333\n"))
	if err != nil || c.Shards != 8 || c.NATS.Port != 4333 || c.NATS.Replicas != 1 {
		t.Fatalf("load = %+v, %v", c, err)
	}
}

// TestServeRefusesDataDirFile: serve with a data_dir that is a file stops
// at once naming data_dir, instead of waiting 30s for the embedded server
// and blaming the port.
func TestServeRefusesDataDirFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	code, _, e := run(ctx, "serve", "--data-dir", file, "--nats-port", "-1", "--listen", "127.0.0.1:0")
	if code != ExitError || !strings.HasPrefix(e, "error: data_dir: ") || !strings.Contains(e, file) {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming data_dir and %s", code, e, file)
	}
	t.Logf("refused after %s", time.Since(start))
}
