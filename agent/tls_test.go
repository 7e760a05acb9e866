package agent

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/internal/tlstest"
)

// TestTLSConfigKeys: nats.tls.* are read from the file and from AX_NATS_TLS_*,
// printed unmasked (paths, not secrets), and a client certificate without
// its key is refused naming the key.
func TestTLSConfigKeys(t *testing.T) {
	path := writeConfig(t, "id: edge-1\ndata_dir: /var/lib/ax\nnats:\n  tls:\n    ca_file: /etc/ax/ca.crt\n    cert_file: /etc/ax/edge-1.crt\n")
	cfg, err := LoadConfig(path, envOf(map[string]string{"AX_NATS_TLS_KEY_FILE": "/etc/ax/edge-1.key"}), nil)
	must(t, err)
	want := TLSConfig{CAFile: "/etc/ax/ca.crt", CertFile: "/etc/ax/edge-1.crt", KeyFile: "/etc/ax/edge-1.key"}
	if cfg.NATS.TLS != want {
		t.Fatalf("nats.tls = %+v, want %+v", cfg.NATS.TLS, want)
	}
	must(t, cfg.Validate())
	out, err := yaml.Marshal(cfg.Masked())
	must(t, err)
	for _, p := range []string{want.CAFile, want.CertFile, want.KeyFile} {
		if !strings.Contains(string(out), p) {
			t.Errorf("printed config lacks %s:\n%s", p, out)
		}
	}
	cfg.NATS.TLS.KeyFile = ""
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "nats.tls.cert_file") {
		t.Fatalf("cert without key: %v, want ErrConfig naming nats.tls.cert_file", err)
	}
}

// TestTLSOptions: tlsOptions returns nothing without nats.tls, options for
// usable files, and an error naming the key of an unusable file.
func TestTLSOptions(t *testing.T) {
	ca := tlstest.NewCA(t, "agent-test")
	cert, key := ca.Client(t, "edge-1")
	tests := []struct {
		name  string
		tc    TLSConfig
		nopts int
		key   string // "" = no error
	}{
		{"none", TLSConfig{}, 0, ""},
		{"ca only", TLSConfig{CAFile: ca.File}, 2, ""},
		{"ca and client cert", TLSConfig{CAFile: ca.File, CertFile: cert, KeyFile: key}, 3, ""},
		{"client cert, system roots", TLSConfig{CertFile: cert, KeyFile: key}, 2, ""},
		{"missing ca", TLSConfig{CAFile: ca.File + ".missing"}, 0, "nats.tls.ca_file"},
		{"ca holds no certificate", TLSConfig{CAFile: key}, 0, "nats.tls.ca_file"},
		{"key does not match", TLSConfig{CertFile: cert, KeyFile: ca.File}, 0, "nats.tls.cert_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tlsOptions(tc.tc)
			if tc.key == "" {
				must(t, err)
				if len(opts) != tc.nopts {
					t.Fatalf("%d options, want %d", len(opts), tc.nopts)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.key)
			}
		})
	}
}
