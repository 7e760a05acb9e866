package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/tlstest"
	"github.com/axsched/ax/pkg/protocol"
)

// TestServeHTTPSAndNATSTLS runs serve with api.tls and nats.tls (embedded
// server with verify_clients): client commands over https work with
// --ca-file or AX_API_CA_FILE and fail without them; a --ca-file with an
// http URL is refused. exec watch reaches the TLS NATS with the CA and a
// client certificate (flags, AX_NATS_TLS_* env, or --config with flags
// overriding) and fails without them.
func TestServeHTTPSAndNATSTLS(t *testing.T) {
	ca := newTestCA(t)
	apiCert, apiKey := ca.Server(t, "api")
	natsCert, natsKey := ca.Server(t, "nats")
	cfg := writeFile(t, "c.yaml", "data_dir: "+t.TempDir()+"\nlog:\n  format: json\n"+
		"nats:\n  port: -1\n  tls:\n    cert_file: "+natsCert+"\n    key_file: "+natsKey+"\n    ca_file: "+ca.File+"\n    verify_clients: true\n"+
		"api:\n  listen: 127.0.0.1:0\n  tls:\n    cert_file: "+apiCert+"\n    key_file: "+apiKey+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := serveListening(ctx, t, "serve", "--config", cfg)
	if !strings.Contains(errb.String(), `"addr":"`+addr+`","https":true`) {
		t.Fatalf("serve does not announce https: %s", errb.String())
	}
	natsURL := ""
	if m := regexp.MustCompile(`"nats":"(tls://[^"]+)"`).FindStringSubmatch(errb.String()); m != nil {
		natsURL = m[1]
	} else {
		t.Fatalf("embedded NATS does not announce a tls:// URL: %s", errb.String())
	}
	url := "https://" + addr

	tests := []struct {
		name   string
		env    string // AX_API_CA_FILE
		args   []string
		code   int
		stderr string
	}{
		{"--ca-file", "", []string{"agent", "ls", "--api", url, "--ca-file", ca.File}, ExitOK, ""},
		{"AX_API_CA_FILE", ca.File, []string{"agent", "ls", "--api", url}, ExitOK, ""},
		{"no CA file", "", []string{"agent", "ls", "--api", url}, ExitError, "certificate"},
		{"http URL against HTTPS", "", []string{"agent", "ls", "--api", "http://" + addr}, ExitError, ""},
		{"CA file with an http URL", "", []string{"agent", "ls", "--api", "http://" + addr, "--ca-file", ca.File}, ExitError, "--ca-file"},
		{"missing CA file", "", []string{"agent", "ls", "--api", url, "--ca-file", ca.File + ".missing"}, ExitError, "--ca-file"},
		{"CA file without a certificate", "", []string{"agent", "ls", "--api", url, "--ca-file", cfg}, ExitError, "no PEM certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AX_API_CA_FILE", tc.env)
			code, _, e := run(ctx, tc.args...)
			if code != tc.code || !strings.Contains(e, tc.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, e, tc.stderr)
			}
		})
	}

	watchNATSTLS(ctx, t, ca, url, natsURL, cfg)

	// A plain HTTPS client that does not trust the private CA is refused.
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("https without the CA: no error")
	} else if ua := (x509.UnknownAuthorityError{}); !errors.As(err, &ua) {
		t.Errorf("https without the CA: %v, want an unknown-authority error", err)
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

// watchNATSTLS: exec watch against the TLS NATS of serve (verify_clients)
// receives the event of an asap job with the CA and a client certificate
// and fails without them, naming the key.
func watchNATSTLS(ctx context.Context, t *testing.T, ca *tlstest.CA, apiURL, natsURL, serveCfg string) {
	t.Helper()
	job := writeFile(t, "job.yaml", "name: tls watch\nhandler: http\npayload: {url: \"http://127.0.0.1:9/x\"}\n"+
		"schedule: {asap: true}\ntarget: {agent: edge-7}\n")
	code, out, e := run(ctx, "job", "apply", "--api", apiURL, "--ca-file", ca.File, "-f", job, "-o", "json")
	var res []applyResult
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 {
		t.Fatalf("apply: %d %s %s", code, out, e)
	}
	id := res[0].Job.ID
	cert, key := ca.Client(t, "watch")
	watchArgs := []string{"exec", "watch", "--job", id, "--since", "10m", "--count", "1", "-o", "json"}
	tests := []struct {
		name   string
		env    map[string]string // AX_NATS_TLS_*
		args   []string
		code   int
		stderr string
	}{
		{"flags", nil, []string{"--nats-url", natsURL, "--nats-ca-file", ca.File, "--nats-cert", cert, "--nats-key", key}, ExitOK, ""},
		{"env", map[string]string{"AX_NATS_TLS_CA_FILE": ca.File, "AX_NATS_TLS_CERT_FILE": cert, "AX_NATS_TLS_KEY_FILE": key},
			[]string{"--nats-url", natsURL}, ExitOK, ""},
		// The serve config gives ca_file; its cert_file/key_file (the server's pair) are overridden by the flags.
		{"config with flags over it", nil, []string{"--config", serveCfg, "--nats-url", natsURL, "--nats-cert", cert, "--nats-key", key}, ExitOK, ""},
		{"nats:// URL made TLS by the CA flag", nil, []string{"--nats-url", "nats://" + strings.TrimPrefix(natsURL, "tls://"),
			"--nats-ca-file", ca.File, "--nats-cert", cert, "--nats-key", key}, ExitOK, ""},
		{"no CA", nil, []string{"--nats-url", natsURL, "--nats-cert", cert, "--nats-key", key}, ExitError, "unknown authority"},
		{"no client certificate", nil, []string{"--nats-url", natsURL, "--nats-ca-file", ca.File}, ExitError, "nats.url"},
		{"missing CA file", nil, []string{"--nats-url", natsURL, "--nats-ca-file", ca.File + ".missing"}, ExitError, "nats.tls.ca_file"},
		{"CA file without a certificate", nil, []string{"--nats-url", natsURL, "--nats-ca-file", serveCfg}, ExitError, "no PEM certificate"},
		{"cert without key", nil, []string{"--nats-url", natsURL, "--nats-ca-file", ca.File, "--nats-cert", cert}, ExitError, "nats.tls.key_file"},
		{"key without cert", map[string]string{"AX_NATS_TLS_KEY_FILE": key}, []string{"--nats-url", natsURL}, ExitError, "nats.tls.cert_file"},
		{"bad key pair", nil, []string{"--nats-url", natsURL, "--nats-cert", cert, "--nats-key", ca.File}, ExitError, "nats.tls.cert_file"},
	}
	for _, tc := range tests {
		t.Run("watch "+tc.name, func(t *testing.T) {
			for _, k := range []string{"AX_NATS_TLS_CA_FILE", "AX_NATS_TLS_CERT_FILE", "AX_NATS_TLS_KEY_FILE"} {
				t.Setenv(k, tc.env[k])
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			code, out, e := run(wctx, append(slices.Clone(watchArgs), tc.args...)...)
			if code != tc.code || !strings.Contains(e, tc.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q), stdout %q", code, tc.code, e, tc.stderr, out)
			}
			if tc.code != ExitOK {
				return
			}
			var ev protocol.Event
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil || ev.JobID != id {
				t.Fatalf("event %q (%v), want one of job %s", out, err, id)
			}
		})
	}
}

// newTestCA makes a throw-away CA (files in t.TempDir()).
func newTestCA(t *testing.T) *tlstest.CA { return tlstest.NewCA(t, "ax-test") }

// TestTLSConfigErrorsNameTheKey: bad nats.tls / api.tls settings are
// refused with the key named.
func TestTLSConfigErrorsNameTheKey(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.Server(t, "s")
	tests := []struct {
		name, content, key string
	}{
		{"verify_clients not a bool", "nats:\n  tls:\n    verify_clients: maybe\n", "nats.tls.verify_clients"},
		{"embedded without cert_file", "nats:\n  tls:\n    ca_file: " + ca.File + "\n", "nats.tls.cert_file"},
		{"embedded without key_file", "nats:\n  tls:\n    cert_file: " + cert + "\n", "nats.tls.key_file"},
		{"verify_clients without ca_file", "nats:\n  tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n    verify_clients: true\n", "nats.tls.ca_file"},
		{"verify_clients with nats.url", "nats:\n  url: nats://h:4222\n  tls:\n    verify_clients: true\n", "nats.tls.verify_clients"},
		{"client cert without key", "nats:\n  url: nats://h:4222\n  tls:\n    cert_file: " + cert + "\n", "nats.tls.cert_file"},
		{"unknown tls key", "nats:\n  tls:\n    crt: x\n", "nats.tls.crt"},
		{"api cert without key", "api:\n  tls:\n    cert_file: " + cert + "\n", "api.tls.cert_file"},
		{"api key without cert", "api:\n  tls:\n    key_file: " + key + "\n", "api.tls.cert_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, writeFile(t, "c.yaml", tc.content))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.key)
			}
		})
	}
	// serve checks the API key pair before it starts anything.
	bad := writeFile(t, "c.yaml", "data_dir: "+t.TempDir()+"\nnats:\n  port: -1\napi:\n  listen: 127.0.0.1:0\n  tls:\n    cert_file: "+cert+"\n    key_file: "+ca.File+"\n")
	if code, _, e := run(context.Background(), "serve", "--config", bad); code != ExitError || !strings.Contains(e, "api.tls.cert_file") {
		t.Fatalf("serve with a bad key file: exit %d, stderr %q", code, e)
	}
}
