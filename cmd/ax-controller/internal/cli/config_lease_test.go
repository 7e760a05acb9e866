package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/controller"
)

// TestLeaseKeysDefaults: without any source, lease_ttl, lease_renew_interval
// and ack_wait are controller.DefaultConfig's, and they reach
// controller.Config unchanged.
func TestLeaseKeysDefaults(t *testing.T) {
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	d := controller.DefaultConfig()
	if c.LeaseTTL != d.LeaseTTL || c.LeaseRenewInterval != d.LeaseRenewInterval || c.AckWait != d.AckWait {
		t.Errorf("defaults: lease_ttl %s lease_renew_interval %s ack_wait %s; want %s %s %s",
			c.LeaseTTL, c.LeaseRenewInterval, c.AckWait, d.LeaseTTL, d.LeaseRenewInterval, d.AckWait)
	}
	cc := c.controllerConfig()
	if cc.LeaseTTL != c.LeaseTTL || cc.LeaseRenewInterval != c.LeaseRenewInterval || cc.AckWait != c.AckWait {
		t.Errorf("controllerConfig: %s %s %s, want %s %s %s", cc.LeaseTTL, cc.LeaseRenewInterval, cc.AckWait,
			c.LeaseTTL, c.LeaseRenewInterval, c.AckWait)
	}
}

// TestLeaseKeysFromYAMLEnvAndFlags: each of the three keys is read from the
// YAML file, from its AX_* variable and from its serve flag, with the same
// precedence as the other keys (file < env < flag), and reaches
// controller.Config.
func TestLeaseKeysFromYAMLEnvAndFlags(t *testing.T) {
	keys := []struct {
		key, env, flag string
		get            func(controller.Config) time.Duration
	}{
		{"lease_ttl", "AX_LEASE_TTL", "--lease-ttl", func(c controller.Config) time.Duration { return c.LeaseTTL }},
		{"lease_renew_interval", "AX_LEASE_RENEW_INTERVAL", "--lease-renew-interval", func(c controller.Config) time.Duration { return c.LeaseRenewInterval }},
		{"ack_wait", "AX_ACK_WAIT", "--ack-wait", func(c controller.Config) time.Duration { return c.AckWait }},
	}
	// Values valid together (renew ≤ ttl/2 in every mix of sources).
	// Each under a minute: --print-config shows time.Duration.String().
	fileVal := map[string]string{"lease_ttl": "30s", "lease_renew_interval": "4s", "ack_wait": "35s"}
	envVal := map[string]string{"lease_ttl": "40s", "lease_renew_interval": "5s", "ack_wait": "45s"}
	flagVal := map[string]string{"lease_ttl": "50s", "lease_renew_interval": "6s", "ack_wait": "55s"}
	for _, k := range keys {
		t.Run(k.key, func(t *testing.T) {
			path := writeFile(t, "c.yaml", k.key+": "+fileVal[k.key]+"\n")
			c, err := load(t, path)
			if err != nil {
				t.Fatalf("yaml: %v", err)
			}
			if got, want := k.get(c.controllerConfig()), mustDur(t, fileVal[k.key]); got != want {
				t.Errorf("yaml: %s = %s, want %s", k.key, got, want)
			}

			t.Setenv(k.env, envVal[k.key])
			c, err = load(t, path)
			if err != nil {
				t.Fatalf("env: %v", err)
			}
			if got, want := k.get(c.controllerConfig()), mustDur(t, envVal[k.key]); got != want {
				t.Errorf("env %s over the file: %s = %s, want %s", k.env, k.key, got, want)
			}

			code, out, e := run(context.Background(), "serve", "--config", path, k.flag, flagVal[k.key], "--print-config")
			if code != 0 {
				t.Fatalf("flag: exit %d: %s", code, e)
			}
			var printed Config
			if err := yaml.Unmarshal([]byte(out), &printed); err != nil {
				t.Fatalf("print-config: %v\n%s", err, out)
			}
			if got, want := k.get(printed.controllerConfig()), mustDur(t, flagVal[k.key]); got != want {
				t.Errorf("flag %s over env and file: %s = %s, want %s", k.flag, k.key, got, want)
			}
			if !strings.Contains(out, k.key+": "+flagVal[k.key]) {
				t.Errorf("print-config does not show %s: %s\n%s", k.key, flagVal[k.key], out)
			}
		})
	}
}

// TestLeaseRenewIntervalFollowsTTL: with lease_renew_interval unset it is
// lease_ttl/3 whatever source set lease_ttl; set, it is taken as given.
func TestLeaseRenewIntervalFollowsTTL(t *testing.T) {
	c, err := load(t, writeFile(t, "c.yaml", "lease_ttl: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseRenewInterval != 10*time.Second {
		t.Errorf("lease_ttl 30s from the file: lease_renew_interval = %s, want 10s", c.LeaseRenewInterval)
	}
	t.Setenv("AX_LEASE_TTL", "3s")
	t.Setenv("AX_HEARTBEAT_INTERVAL", "1s")
	t.Setenv("AX_AGENT_OFFLINE_AFTER", "3s")
	c, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseRenewInterval != time.Second {
		t.Errorf("lease_ttl 3s from the env: lease_renew_interval = %s, want 1s", c.LeaseRenewInterval)
	}
	c, err = load(t, writeFile(t, "c.yaml", "lease_renew_interval: 500ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseTTL != 3*time.Second || c.LeaseRenewInterval != 500*time.Millisecond {
		t.Errorf("explicit: lease_ttl %s lease_renew_interval %s, want 3s 500ms", c.LeaseTTL, c.LeaseRenewInterval)
	}
}

// TestLeaseKeysRefusedNamingTheKey: a bad value of each lease key, from the
// file or from the environment, is refused with ErrConfig and an error
// naming that key (and the key it conflicts with).
func TestLeaseKeysRefusedNamingTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		env           map[string]string
		want          []string
	}{
		{"ttl shorter than 2 heartbeats", "heartbeat_interval: 5s\nlease_ttl: 9s\n", nil, []string{"lease_ttl", "heartbeat_interval"}},
		{"ttl shorter than 2 heartbeats, env", "", map[string]string{"AX_HEARTBEAT_INTERVAL": "10s", "AX_AGENT_OFFLINE_AFTER": "30s", "AX_LEASE_TTL": "15s"}, []string{"lease_ttl", "heartbeat_interval"}},
		{"ttl below 500ms", "heartbeat_interval: 100ms\nlease_ttl: 300ms\n", nil, []string{"lease_ttl", "500ms"}},
		{"ttl over 1h", "lease_ttl: 2h\n", nil, []string{"lease_ttl", "1h"}},
		{"ttl not a duration", "lease_ttl: long\n", nil, []string{"lease_ttl", "not a duration"}},
		{"ttl as a number", "lease_ttl: 15\n", nil, []string{"lease_ttl", "duration"}},
		{"ttl negative", "lease_ttl: -15s\n", nil, []string{"lease_ttl"}},
		{"ttl bad, env", "", map[string]string{"AX_LEASE_TTL": "fortnight"}, []string{"lease_ttl", "fortnight"}},
		{"renew over ttl/2", "lease_ttl: 15s\nlease_renew_interval: 8s\n", nil, []string{"lease_renew_interval", "lease_ttl/2"}},
		{"renew over ttl/2, env", "", map[string]string{"AX_LEASE_RENEW_INTERVAL": "10s"}, []string{"lease_renew_interval", "lease_ttl/2"}},
		{"renew below 10ms", "lease_renew_interval: 1ms\n", nil, []string{"lease_renew_interval"}},
		{"renew not a duration", "lease_renew_interval: often\n", nil, []string{"lease_renew_interval", "not a duration"}},
		{"ack_wait below 1s", "ack_wait: 500ms\n", nil, []string{"ack_wait", "1s"}},
		{"ack_wait over 1h", "ack_wait: 90m\n", nil, []string{"ack_wait", "1h"}},
		{"ack_wait not a duration", "ack_wait: later\n", nil, []string{"ack_wait", "not a duration"}},
		{"ack_wait bad, env", "", map[string]string{"AX_ACK_WAIT": "0.5s"}, []string{"ack_wait"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			path := ""
			if tc.content != "" {
				path = writeFile(t, "c.yaml", tc.content)
			}
			_, err := load(t, path)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, does not mention %q", err, w)
				}
			}
			if !strings.HasPrefix(errorText(err), tc.want[0]+": ") {
				t.Errorf("error %q does not start with the key %s", errorText(err), tc.want[0])
			}
		})
	}
	// The same through the command line: exit 1, "error: lease_ttl: ...".
	code, _, e := run(context.Background(), "serve", "--lease-ttl", "1s", "--print-config")
	if code != ExitError || !strings.HasPrefix(e, "error: lease_ttl: ") {
		t.Errorf("serve --lease-ttl 1s: exit %d, stderr %q; want exit 1 naming lease_ttl", code, e)
	}
}

// TestReplicaClusterConfigLoads: the multi-replica settings the sample
// documents (several NATS URLs, R3 streams and buckets, a node name per
// replica) load and reach controller.Config.
func TestReplicaClusterConfigLoads(t *testing.T) {
	c, err := load(t, writeFile(t, "c.yaml", "node: ctl-b\nnats:\n  url: nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222\n  replicas: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	cc := c.controllerConfig()
	if cc.Node != "ctl-b" || cc.NATS.Replicas != 3 || cc.NATS.URL != "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222" {
		t.Errorf("got node %q replicas %d url %q", cc.Node, cc.NATS.Replicas, cc.NATS.URL)
	}
	// R3 needs a cluster: the embedded server is refused, naming the key.
	if _, err := load(t, writeFile(t, "c.yaml", "nats:\n  replicas: 3\n")); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "nats.replicas") {
		t.Errorf("replicas 3 with the embedded server: %v, want an error naming nats.replicas", err)
	}
}

func mustDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
