package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const sampleConfig = "../configs/ax-agent.yaml"

func noEnv(string) (string, bool) { return "", false }

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	must(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoadConfigSample(t *testing.T) {
	cfg, err := LoadConfig(sampleConfig, noEnv, nil)
	must(t, err)
	must(t, cfg.Validate())
	want := DefaultConfig()
	want.ID, want.Workers = "edge-7", 4
	want.Labels = map[string]string{"site": "plant-3", "role": "valve"}
	want.Exec = ExecConfig{Allow: []string{"/usr/local/bin/ax-*", "/opt/valve/bin/push-setpoint"}, EnvAllow: []string{}, PermanentExitCodes: []int{2, 64}}
	want.HTTP.Allow = []string{"https://cache.plant-3.local/api/"}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("sample config:\n got %+v\nwant %+v", cfg, want)
	}
}

// TestLoadConfigFileErrorsNameTheKey: a bad file is refused with ErrConfig
// and a message naming the key (and why).
func TestLoadConfigFileErrorsNameTheKey(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown top-level key", "id: a\nclok:\n  max_skew: 1s\n", "clok: line 2: unknown key"},
		{"unknown nested key", "clock:\n  max_skwe: 1s\n", "clock.max_skwe: line 2: unknown key"},
		{"int from text", "workers: many\n", `workers: line 1: "many" is not an integer`},
		{"duration without unit", "clock:\n  max_skew: 5\n", `clock.max_skew: line 2: "5" is not a duration`},
		{"bad duration", "nats:\n  heartbeat: soon\n", `nats.heartbeat: line 2: "soon" is not a duration`},
		{"list item type", "exec:\n  permanent_exit_codes: [2, x]\n", `exec.permanent_exit_codes[1]: line 2: "x" is not an integer`},
		{"section as value", "clock: 5s\n", "clock: line 1: must be a mapping"},
		{"list as value", "workers: [1, 2]\n", "workers: line 1: must be a single value, got a list"},
		{"key given twice", "id: a\nid: b\n", "id: line 2: key given twice"},
		{"bool from text", "outbox:\n  coalesce_skipped: maybe\n", `outbox.coalesce_skipped: line 2: "maybe" is not true or false`},
		{"not a mapping", "- id: a\n", "(top level): line 1: must be a mapping"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tc.body), noEnv, nil)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig(writeConfig(t, "id: [\n"), noEnv, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("YAML syntax error = %v, want ErrConfig", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml"), noEnv, nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file = %v, want ErrNotExist", err)
	}
}

// TestLoadConfigFileValues: what a file may say, and what it leaves alone.
func TestLoadConfigFileValues(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(Config) bool
	}{
		{"empty file keeps defaults", "# nothing\n", func(c Config) bool { return reflect.DeepEqual(c, DefaultConfig()) }},
		{"null keeps the default", "nats:\n  url:\nclock:\n", func(c Config) bool { return c.NATS.URL == DefaultNATSURL }},
		{"quoted integer", "workers: \"6\"\n", func(c Config) bool { return c.Workers == 6 }},
		{"list", "exec:\n  allow: [/a, /b]\n", func(c Config) bool { return reflect.DeepEqual(c.Exec.Allow, []string{"/a", "/b"}) }},
		{"labels", "labels:\n  site: plant-3\n  rack: 7\n", func(c Config) bool {
			return reflect.DeepEqual(c.Labels, map[string]string{"site": "plant-3", "rack": "7"})
		}},
		{"empty list", "exec:\n  allow: []\n", func(c Config) bool { return len(c.Exec.Allow) == 0 }},
		{"alias", "exec:\n  allow: &l [/a]\nhttp:\n  allow: *l\n", func(c Config) bool { return reflect.DeepEqual(c.HTTP.Allow, []string{"/a"}) }},
		{"durations", "store:\n  retention: 1h30m\n", func(c Config) bool { return c.Store.Retention == 90*time.Minute }},
		{"number as id", "id: 007\n", func(c Config) bool { return c.ID == "007" }},
		{"bool", "outbox:\n  coalesce_skipped: false\n", func(c Config) bool { return !c.Outbox.CoalesceSkipped }},
		{"skipped window", "outbox:\n  skipped_window: 30s\n", func(c Config) bool { return c.Outbox.SkippedWindow == 30*time.Second }},
		{"skipped window default", "", func(c Config) bool { return c.Outbox.SkippedWindow == DefaultSkippedWindow }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadConfig(writeConfig(t, tc.body), noEnv, nil)
			must(t, err)
			if !tc.check(cfg) {
				t.Fatalf("config = %+v", cfg)
			}
		})
	}
}

// TestLoadConfigPrecedence: override > environment > file > default, per key.
func TestLoadConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "id: from-file\nworkers: 3\nnats:\n  url: nats://file:4222\nclock:\n  max_skew: 3s\n")
	env := envOf(map[string]string{
		"AX_WORKERS": "5", "AX_NATS_URL": "nats://env:4222", "AX_CLOCK_MAX_SKEW": "7s",
		"AX_EXEC_ALLOW": "/a, /b", "AX_EXEC_PERMANENT_EXIT_CODES": "2,64", "AX_LABELS": "site=hq, role=gw",
		"AX_NATS_TOKEN":        "", // empty: ignored
		"AX_STORE_SYNCHRONOUS": "normal", "AX_MEMORY_LIMIT_MIB": "16", "AX_OUTBOX_HOLD": "50ms",
		"AX_RELEASE_PAGES_AFTER": "0s",
	})
	cfg, err := LoadConfig(file, env, map[string]string{"nats.url": "nats://flag:4222", "id": "from-flag"})
	must(t, err)
	checks := []struct {
		key       string
		got, want any
	}{
		{"id (flag over file)", cfg.ID, "from-flag"},
		{"nats.url (flag over env)", cfg.NATS.URL, "nats://flag:4222"},
		{"workers (env over file)", cfg.Workers, 5},
		{"clock.max_skew (env over file)", cfg.Clock.MaxSkew, 7 * time.Second},
		{"exec.allow", cfg.Exec.Allow, []string{"/a", "/b"}},
		{"exec.permanent_exit_codes", cfg.Exec.PermanentExitCodes, []int{2, 64}},
		{"labels", cfg.Labels, map[string]string{"site": "hq", "role": "gw"}},
		{"nats.token (empty env ignored)", cfg.NATS.Token, ""},
		{"store.synchronous", cfg.Store.Synchronous, "normal"},
		{"memory_limit_mib", cfg.MemoryLimitMiB, 16},
		{"release_pages_after", cfg.ReleasePagesAfter, time.Duration(0)},
		{"outbox.hold", cfg.Outbox.Hold, 50 * time.Millisecond},
		{"queue.size (default)", cfg.Queue.Size, DefaultQueueSize},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
}

// TestLoadConfigEnvAndOverrideErrors: bad environment values and overrides
// name the key (and the variable).
func TestLoadConfigEnvAndOverrideErrors(t *testing.T) {
	tests := []struct {
		name      string
		env, over map[string]string
		want      string
	}{
		{"env duration", map[string]string{"AX_CLOCK_MAX_SKEW": "5"}, nil, "clock.max_skew: AX_CLOCK_MAX_SKEW:"},
		{"env int", map[string]string{"AX_QUEUE_SIZE": "big"}, nil, `queue.size: AX_QUEUE_SIZE: "big" is not an integer`},
		{"env list item", map[string]string{"AX_EXEC_PERMANENT_EXIT_CODES": "2,x"}, nil, "exec.permanent_exit_codes: AX_EXEC_PERMANENT_EXIT_CODES: item 1"},
		{"env labels", map[string]string{"AX_LABELS": "site"}, nil, `labels: AX_LABELS: "site" is not key=value`},
		{"override int", nil, map[string]string{"workers": "x"}, `workers: "x" is not an integer`},
		{"unknown override", nil, map[string]string{"nats.uri": "x"}, "nats.uri: unknown key"},
		{"override of a section", nil, map[string]string{"nats": "x"}, "nats: unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig("", envOf(tc.env), tc.over)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

// TestConfigYAMLRoundTrip: MarshalYAML writes what LoadConfig reads back
// unchanged, durations as strings, secrets masked by Masked.
func TestConfigYAMLRoundTrip(t *testing.T) {
	cfg, err := LoadConfig(sampleConfig, envOf(map[string]string{"AX_NATS_TOKEN": "s3cret"}), nil)
	must(t, err)
	out, err := yaml.Marshal(cfg)
	must(t, err)
	back, err := LoadConfig(writeConfig(t, string(out)), noEnv, nil)
	must(t, err)
	if !reflect.DeepEqual(back, cfg) {
		t.Fatalf("round trip:\n got %+v\nwant %+v\nyaml:\n%s", back, cfg, out)
	}
	if !strings.Contains(string(out), "max_skew: 2s") || !strings.Contains(string(out), "memory_limit_mib: 20") {
		t.Fatalf("yaml lacks keys or duration strings:\n%s", out)
	}
	masked, err := yaml.Marshal(cfg.Masked())
	must(t, err)
	if strings.Contains(string(masked), "s3cret") || !strings.Contains(string(masked), "token: '*****'") {
		t.Fatalf("secret not masked:\n%s", masked)
	}
}

// FuzzDecodeConfigYAML: no input panics the file decoder, and whatever it
// accepts survives MarshalYAML and decoding again unchanged.
func FuzzDecodeConfigYAML(f *testing.F) {
	sample, err := os.ReadFile(sampleConfig)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte("id: a\nclok: 1\n"))
	f.Add([]byte("labels: {a: b}\nexec: {allow: &x [/a], permanent_exit_codes: [1]}\nhttp: {allow: *x}\n"))
	f.Add([]byte("workers: \"0x10\"\nclock:\n  max_skew: 1h\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := DefaultConfig()
		if err := decodeYAML(data, &cfg); err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back := DefaultConfig()
		if err := decodeYAML(out, &back); err != nil {
			t.Fatalf("decode own output: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normalized(back), normalized(cfg)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, cfg)
		}
	})
}

// normalized treats nil and empty lists and maps alike (YAML writes both as
// [] or {}).
func normalized(c Config) Config {
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	for _, l := range []*[]string{&c.Exec.Allow, &c.Exec.EnvAllow, &c.HTTP.Allow} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if len(c.Exec.PermanentExitCodes) == 0 {
		c.Exec.PermanentExitCodes = nil
	}
	return c
}

// TestLoadConfigNoCoercion: a value of the wrong form is refused with a
// *ConfigError naming the key (list items and map entries by their path)
// and the value given; nothing is split, rounded or wrapped.
func TestLoadConfigNoCoercion(t *testing.T) {
	tests := []struct{ name, body, key, given string }{
		{"list key as a scalar", "exec:\n  allow: /usr/bin/true\n", "exec.allow", `"/usr/bin/true"`},
		{"comma list in a scalar", "exec:\n  allow: /a, /b\n", "exec.allow", `"/a, /b"`},
		{"http list as a scalar", "http:\n  allow: https://x/\n", "http.allow", `"https://x/"`},
		{"int list as a scalar", "exec:\n  permanent_exit_codes: 2\n", "exec.permanent_exit_codes", `"2"`},
		{"list as a mapping", "exec:\n  allow: {a: b}\n", "exec.allow", "a mapping"},
		{"list item a list", "exec:\n  allow: [/a, [/b]]\n", "exec.allow[1]", "a list"},
		{"labels as a scalar", "labels: site=a\n", "labels", `"site=a"`},
		{"label value a mapping", "labels:\n  site: {x: y}\n", "labels.site", "a mapping"},
		{"label given twice", "labels:\n  site: a\n  site: b\n", "labels.site", "twice"},
		{"integer with a fraction", "workers: 1.5\n", "workers", `"1.5"`},
		{"integer oversize", "workers: 99999999999999999999\n", "workers", `"99999999999999999999"`},
		{"exit code oversize", "exec:\n  permanent_exit_codes: [99999999999999999999]\n", "exec.permanent_exit_codes[0]", "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tc.body), noEnv, nil)
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) || ce.Key != tc.key {
				t.Fatalf("err = %v, want a *ConfigError on %s", err, tc.key)
			}
			if !strings.Contains(ce.Reason, tc.given) {
				t.Errorf("reason %q does not show %s", ce.Reason, tc.given)
			}
		})
	}
	// Zero durations are refused by Validate, naming the key.
	cfg, err := LoadConfig(writeConfig(t, "id: a\ndata_dir: /tmp/a\nnats:\n  heartbeat: 0s\n"), noEnv, nil)
	must(t, err)
	var ce *ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Key != "nats.heartbeat" || !strings.Contains(ce.Reason, "0s") {
		t.Fatalf("Validate = %v, want a *ConfigError on nats.heartbeat", err)
	}
	// The environment keeps its comma-separated form.
	cfg, err = LoadConfig("", envOf(map[string]string{"AX_EXEC_ALLOW": "/a,/b"}), nil)
	must(t, err)
	if !reflect.DeepEqual(cfg.Exec.Allow, []string{"/a", "/b"}) {
		t.Fatalf("exec.allow from env = %v", cfg.Exec.Allow)
	}
}
