package controller

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller/driver"
)

// TestConfigValidate: every bad key gives an error naming it.
func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.DataDir = "/tmp/ax"
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	ext := DefaultConfig()
	ext.NATS.URL = "nats://nats.example:4222"
	ext.NATS.Replicas = 3
	if err := ext.Validate(); err != nil {
		t.Fatalf("external config: %v", err)
	}
	cluster := ext
	cluster.NATS.URL = "nats://a:4222, nats://b:4222,tls://c:4222"
	if err := cluster.Validate(); err != nil {
		t.Fatalf("cluster URLs: %v", err)
	}
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(c *Config)
		key  string
	}{
		{"bad node", func(c *Config) { c.Node = "ctl 1" }, "node"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data_dir"},
		{"port too big", func(c *Config) { c.NATS.Port = 70000 }, "nats.port: must be between -1 and 65535"},
		{"port negative", func(c *Config) { c.NATS.Port = -2 }, "nats.port"},
		{"public host", func(c *Config) { c.NATS.Host = "0.0.0.0" }, "nats.host"},
		{"bad url", func(c *Config) { c.NATS.URL = "::nope" }, "nats.url"},
		{"bad scheme", func(c *Config) { c.NATS.URL = "http://x:1" }, "nats.url"},
		{"bad second url", func(c *Config) { c.NATS.URL = "nats://a:4222,http://b:4222" }, "nats.url"},
		{"empty url in list", func(c *Config) { c.NATS.URL = "nats://a:4222,,nats://b:4222" }, "nats.url"},
		{"creds without url", func(c *Config) { c.NATS.CredsFile = "/x.creds" }, "nats.creds_file"},
		{"replicas 2", func(c *Config) { c.NATS.Replicas = 2 }, "nats.replicas"},
		{"embedded replicas 3", func(c *Config) { c.NATS.Replicas = 3 }, "nats.replicas"},
		{"shards", func(c *Config) { c.Shards = 5000 }, "shards"},
		{"negative shards", func(c *Config) { c.Shards = -1 }, "shards"},
		{"heartbeat", func(c *Config) { c.HeartbeatInterval = time.Millisecond }, "heartbeat_interval"},
		{"offline before heartbeat", func(c *Config) { c.AgentOfflineAfter = time.Second }, "agent_offline_after"},
		{"lease ttl short", func(c *Config) { c.LeaseTTL = 100 * time.Millisecond }, "lease_ttl"},
		{"lease ttl under 2 heartbeats", func(c *Config) { c.LeaseTTL = 9 * time.Second }, "lease_ttl"},
		{"renew over half ttl", func(c *Config) { c.LeaseRenewInterval = 8 * time.Second }, "lease_renew_interval"},
		{"ack wait", func(c *Config) { c.AckWait = time.Millisecond }, "ack_wait"},
		{"data dir is a file", func(c *Config) { c.DataDir = file }, "data_dir"},
		{"data dir below a file", func(c *Config) { c.DataDir = filepath.Join(file, "sub") }, "data_dir"},
		{"reports max bytes small", func(c *Config) { c.Reports.MaxBytes = 1000 }, "reports.max_bytes: must be at least"},
		{"reports max bytes negative", func(c *Config) { c.Reports.MaxBytes = -1 }, "reports.max_bytes"},
		{"reports max per subject small", func(c *Config) { c.Reports.MaxPerSubject = 10 }, "reports.max_per_subject: must be 0 (derived from reports.max_bytes) or at least 64"},
		{"reports max per subject negative", func(c *Config) { c.Reports.MaxPerSubject = -5 }, "reports.max_per_subject"},
		{"reports max age short", func(c *Config) { c.Reports.MaxAge = time.Minute }, "reports.max_age: must be at least 1h"},
		{"reports max age negative", func(c *Config) { c.Reports.MaxAge = -time.Hour }, "reports.max_age"},
		{"dedup window short", func(c *Config) { c.Reports.DedupWindow = 30 * time.Second }, "reports.dedup_window: must be between 1m0s and 24h0m0s"},
		{"dedup window long", func(c *Config) { c.Reports.DedupWindow = 25 * time.Hour }, "reports.dedup_window: must be between"},
		{"dedup window negative", func(c *Config) { c.Reports.DedupWindow = -time.Hour }, "reports.dedup_window"},
		{"dedup window over max age", func(c *Config) { c.Reports.MaxAge, c.Reports.DedupWindow = time.Hour, 2*time.Hour }, "reports.dedup_window: must be at most reports.max_age"},
		{"history retention short", func(c *Config) { c.History.Retention = time.Second }, "history.retention: must be between 1m and 168h0m0s"},
		{"history retention beyond AX_EVT", func(c *Config) { c.History.Retention = 30 * 24 * time.Hour }, "history.retention: must be between"},
		{"forward timeout short", func(c *Config) { c.Forward.Timeout = time.Millisecond }, "forward.timeout: must be between 100ms and 1m0s"},
		{"forward timeout long", func(c *Config) { c.Forward.Timeout = 2 * time.Minute }, "forward.timeout: must be between"},
		{"forward timeout negative", func(c *Config) { c.Forward.Timeout = -time.Second }, "forward.timeout"},
		{"forward hold short", func(c *Config) { c.Forward.Hold = 10 * time.Millisecond }, "forward.hold: must be between 1s and 1h0m0s"},
		{"forward hold long", func(c *Config) { c.Forward.Hold = 2 * time.Hour }, "forward.hold: must be between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("Validate = %v, want ErrConfig naming %q", err, tt.key)
			}
			var ce *ConfigError
			if errors.As(err, &ce) && !strings.HasPrefix(tt.key, ce.Key) {
				t.Fatalf("Validate = %v: key %q, want %q", err, ce.Key, tt.key)
			}
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New accepted a bad config: %v", err)
			}
		})
	}
}

// TestShardCountFixed: a second start with another shard count is refused.
func TestShardCountFixed(t *testing.T) {
	dir := t.TempDir()
	c := startController(t, testConfig(t, dir))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir)
	cfg.Shards = 4
	c2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c2.Start(tctx(t))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "shards") {
		t.Fatalf("Start with another shard count = %v", err)
	}
	if err := c2.Ready(tctx(t)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready after failed start = %v", err)
	}
}

// TestForwardConfigReachesTheDriver: forward.timeout and forward.hold are
// the job-change driver's Timeout and Hold; left zero, the driver's
// defaults.
func TestForwardConfigReachesTheDriver(t *testing.T) {
	tests := []struct {
		name          string
		set           ForwardConfig
		timeout, hold time.Duration
	}{
		{"set", ForwardConfig{Timeout: 750 * time.Millisecond, Hold: 2 * time.Minute}, 750 * time.Millisecond, 2 * time.Minute},
		{"zero takes the defaults", ForwardConfig{}, driver.DefaultTimeout, driver.DefaultHold},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Forward = tt.set
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := c.driver.Config()
			if got.Timeout != tt.timeout || got.Hold != tt.hold {
				t.Fatalf("driver timeout %s, hold %s; want %s, %s", got.Timeout, got.Hold, tt.timeout, tt.hold)
			}
		})
	}
}
