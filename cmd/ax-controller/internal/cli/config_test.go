package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/controller/api"
)

func tokenAdmin() api.Token {
	return api.Token{Name: "ops", Token: "ops-secret-0123456789abcdef", Role: api.RoleAdmin}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, path string) (Config, error) {
	t.Helper()
	v, err := newViper(path, pflag.NewFlagSet("x", pflag.ContinueOnError), nil)
	if err != nil {
		return Config{}, err
	}
	return loadConfig(v)
}

// TestSampleConfigs loads every sample in configs/: the controller config
// through the config loader, every job file through job apply's parser.
func TestSampleConfigs(t *testing.T) {
	cfg, err := load(t, "../../../../configs/ax-controller.yaml")
	if err != nil {
		t.Fatalf("configs/ax-controller.yaml: %v", err)
	}
	// The sample documents the defaults: loading it equals loading nothing.
	def, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := yaml.Marshal(cfg)
	b, _ := yaml.Marshal(def)
	if string(a) != string(b) {
		t.Errorf("sample differs from the defaults:\n%s\nvs\n%s", a, b)
	}
	// Every key of the loader appears in the sample.
	data, err := os.ReadFile("../../../../configs/ax-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range knownKeys() {
		leaf := k[strings.LastIndexByte(k, '.')+1:]
		if !regexp.MustCompile(`(?m)^\s*` + leaf + `:`).Match(data) {
			t.Errorf("configs/ax-controller.yaml does not document %s", k)
		}
	}
	for _, f := range jobFiles(t) {
		jobs, err := LoadJobFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, j := range jobs {
			if err := j.Job.Validate(); err != nil {
				t.Errorf("%s: %v", j.Source, err)
			}
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, content, key string
	}{
		{"unknown top key", "nodes: x\n", "nodes"},
		{"unknown nested key", "nats:\n  prot: 4222\n", "nats.prot"},
		{"bad duration", "heartbeat_interval: soon\n", "heartbeat_interval"},
		{"duration as number", "heartbeat_interval: 5\n", "heartbeat_interval"},
		{"port not a number", "nats:\n  port: many\n", "nats.port"},
		{"bad log level", "log:\n  level: loud\n", "log.level"},
		{"bad log format", "log:\n  format: xml\n", "log.format"},
		{"bad listen", "api:\n  listen: nowhere\n", "api.listen"},
		{"tokens not a list", "api:\n  tokens: abc\n", "api.tokens"},
		{"token unknown key", "api:\n  tokens:\n    - {name: a, token: 0123456789abcdefgh, role: admin, scope: all}\n", "api.tokens[0].scope"},
		{"token too short", "api:\n  tokens:\n    - {name: a, token: short, role: admin}\n", "api.tokens[0].token"},
		{"token bad role", "api:\n  tokens:\n    - {name: a, token: 0123456789abcdefgh, role: root}\n", "api.tokens[0].role"},
		{"controller key: node", "node: \"a b\"\n", "node"},
		{"controller key: shards", "shards: 5000\n", "shards"},
		{"controller key: nats.host", "nats:\n  host: 0.0.0.0\n", "nats.host"},
		{"controller key: replicas", "nats:\n  replicas: 2\n", "nats.replicas"},
		{"not YAML", "node: [\n", "bad.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "c.yaml"
			if tc.key == "bad.yaml" {
				name = "bad.yaml"
			}
			_, err := load(t, writeFile(t, name, tc.content))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.key)
			}
		})
	}
	if _, err := load(t, filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestPrecedence: file < env < flag; --print-config masks secrets.
func TestPrecedenceAndPrintConfig(t *testing.T) {
	const secret = "file-secret-0123456789abcdef"
	path := writeFile(t, "c.yaml", "node: from-file\nshards: 4\nlog:\n  level: debug\napi:\n  tokens:\n    - {name: ops, token: "+secret+", role: admin}\n")
	t.Setenv("AX_NODE", "from-env")
	t.Setenv("AX_SHARDS", "8")
	t.Setenv("AX_API_TOKEN", "env-secret-0123456789abcdef")
	code, out, e := run(context.Background(), "serve", "--config", path, "--shards", "2", "--print-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	var got Config
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("print-config is not YAML: %v\n%s", err, out)
	}
	if got.Node != "from-env" || got.Shards != 2 || got.Log.Level != "debug" {
		t.Errorf("precedence: node %q shards %d level %q; want from-env, 2 (flag), debug (file)", got.Node, got.Shards, got.Log.Level)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "env-secret") {
		t.Fatalf("print-config shows a secret:\n%s", out)
	}
	if len(got.API.Tokens) != 1 || got.API.Tokens[0].Token != "****" || got.API.Token != "****" {
		t.Fatalf("tokens not masked:\n%s", out)
	}
	if got.HeartbeatInterval != 5*time.Second {
		t.Errorf("default heartbeat_interval = %s", got.HeartbeatInterval)
	}
}

// TestServeRefusesOpenAPI: a non-loopback API without tokens does not start.
func TestServeRefusesOpenAPI(t *testing.T) {
	dir := t.TempDir()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:8080", "example.com:80"} {
		code, _, e := run(context.Background(), "serve", "--listen", listen, "--data-dir", dir, "--nats-port", "-1")
		if code != ExitError || !strings.Contains(e, "api.tokens") || !strings.Contains(e, "AX_API_TOKEN") {
			t.Errorf("listen %s: exit %d, stderr %q", listen, code, e)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("a refused serve wrote to the data dir: %v", entries)
	}
	// With a token the same address is allowed by the auth check.
	c := Config{API: APIConfig{Listen: "0.0.0.0:8080", Token: "x"}}
	if err := c.checkAuth(); err != nil {
		t.Errorf("with token: %v", err)
	}
	for _, l := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1", "127.9.9.9:1"} {
		if !loopback(l) {
			t.Errorf("loopback(%s) = false", l)
		}
	}
}

// TestServe runs serve in-process: the API answers, tokens are enforced,
// and cancelling the context stops it cleanly.
func TestServe(t *testing.T) {
	t.Setenv("AX_API_TOKEN", "serve-secret-0123456789abcdef")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := serveListening(ctx, t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--nats-port", "-1", "--log-format", "json")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
	res, err := http.Get(url + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", res, err)
	}
	res.Body.Close()
	// AX_API_TOKEN is both the server's admin token and the client's token.
	if code, _, e := run(ctx, "job", "apply", "--api", url, "-f", "../../../../configs/jobs/order-close.yaml"); code != 0 {
		t.Fatalf("apply against serve: %s", e)
	}
	if code, _, e := run(ctx, "job", "ls", "--api", url, "--token", "wrong-token-0123456789"); code != ExitError || !strings.Contains(e, "not valid") {
		t.Fatalf("wrong token accepted: %d %s", code, e)
	}
	if strings.Contains(errb.String(), "serve-secret") {
		t.Fatal("serve logged the token")
	}
	// The file's job has an idempotency_key: apply creates it in a batch,
	// and the audit line names the job it created.
	if !strings.Contains(errb.String(), `"msg":"audit","who":"admin","what":"job.create_batch","status":200`) ||
		!strings.Contains(errb.String(), `"jobs":["ax-`) {
		t.Errorf("no audit line for the apply: %s", errb.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d after cancel: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
