package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// authAPIServer runs a controller with nats.auth: nkeys behind the API and
// returns the API URL and the controller.
func authAPIServer(t *testing.T) (string, *controller.Controller) {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Port = -1
	cfg.NATS.Auth = auth.ModeNKeys
	ctrl := apitest.Start(t, cfg)
	h, err := api.NewHandler(api.Options{Backend: ctrl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, ctrl
}

// TestAgentEnrollRevoke: enroll writes a 0600 seed file that connects to
// the controller's NATS server; revoke makes it useless.
func TestAgentEnrollRevoke(t *testing.T) {
	apiURL, ctrl := authAPIServer(t)
	natsURL := ctrl.NATSURL()
	file := filepath.Join(t.TempDir(), "edge-1.nk")

	code, out, errOut := run(t.Context(), "agent", "enroll", "edge-1", "--labels", "site=lab,rack=3", "-o", file, "--api", apiURL)
	if code != ExitOK {
		t.Fatalf("enroll: exit %d: %s", code, errOut)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o600 {
		t.Fatalf("seed file mode %04o, want 0600", m)
	}
	pub, err := auth.PublicKeyFromSeedFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	seed := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "SU") {
			seed = line
		}
	}
	if seed == "" || !strings.Contains(out, pub) || strings.Contains(out+errOut, seed) {
		t.Fatalf("output must name the public key and never the seed: %q", out)
	}
	opt, err := nats.NkeyOptionFromSeed(file)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, opt, nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("connect with the enrolled seed: %v", err)
	}
	nc.Close()

	// The file is not overwritten by accident, and the agent is not re-enrolled.
	if code, _, errOut := run(t.Context(), "agent", "enroll", "edge-1", "-o", file, "--api", apiURL); code != ExitUsage || !strings.Contains(errOut, "exists") {
		t.Fatalf("enroll over an existing file: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t.Context(), "agent", "enroll", "edge-1", "-o", file, "--force", "--api", apiURL); code != ExitError || !strings.Contains(errOut, "already") {
		t.Fatalf("second enrollment without --rotate: exit %d: %s", code, errOut)
	}
	if pub2, _ := auth.PublicKeyFromSeedFile(file); pub2 != pub {
		t.Fatal("a refused enrollment changed the seed file")
	}

	code, out, errOut = run(t.Context(), "agent", "revoke", "edge-1", "--api", apiURL)
	if code != ExitOK || !strings.Contains(out, pub) {
		t.Fatalf("revoke: exit %d: %s %s", code, out, errOut)
	}
	if _, err := nats.Connect(natsURL, opt, nats.MaxReconnects(0)); err == nil {
		t.Fatal("revoked seed still connects")
	}
	if code, _, _ := run(t.Context(), "agent", "revoke", "edge-1", "--api", apiURL); code != ExitError {
		t.Fatalf("revoke of a revoked agent: exit %d", code)
	}
}

// TestAgentEnrollUsage: bad command lines fail before any identity is issued.
func TestAgentEnrollUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no output file", []string{"agent", "enroll", "edge-1"}},
		{"bad id", []string{"agent", "enroll", "edge 1", "-o", filepath.Join(dir, "x")}},
		{"bad label", []string{"agent", "enroll", "edge-1", "--labels", "site", "-o", filepath.Join(dir, "x")}},
		{"duplicate label", []string{"agent", "enroll", "edge-1", "--labels", "a=1,a=2", "-o", filepath.Join(dir, "x")}},
		{"no id", []string{"agent", "enroll", "-o", filepath.Join(dir, "x")}},
		{"revoke without id", []string{"agent", "revoke"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No API is running: a usage error must come before any request.
			code, _, errOut := run(t.Context(), append(tc.args, "--api", "http://127.0.0.1:1")...)
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d: %s", code, ExitUsage, errOut)
			}
		})
	}
}

// TestAgentEnrollWithoutAuth: a controller with nats.auth none refuses.
func TestAgentEnrollWithoutAuth(t *testing.T) {
	apiURL := apiServer(t)
	file := filepath.Join(t.TempDir(), "x.nk")
	code, _, errOut := run(t.Context(), "agent", "enroll", "edge-1", "-o", file, "--api", apiURL)
	if code != ExitError || !strings.Contains(errOut, "nats.auth") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("seed file written although enrollment failed: %v", err)
	}
}

// TestExecWatchWithAuth: exec watch on the controller's host finds the
// controller's identity from the config (data_dir, nats.auth: nkeys);
// without credentials the server refuses it.
func TestExecWatchWithAuth(t *testing.T) {
	cfg := controller.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Port = testutil.FreePort(t)
	cfg.NATS.Auth = auth.ModeNKeys
	ctrl := apitest.Start(t, cfg)
	j, err := ctrl.CreateJob(t.Context(), protocol.Job{Name: "w", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-w"}})
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "ax.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("data_dir: %s\nnats:\n  port: %d\n  auth: nkeys\n", cfg.DataDir, cfg.NATS.Port)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t.Context(), "exec", "watch", "--config", conf, "--job", j.ID, "--since", "1h", "--count", "1", "-o", "json")
	if code != ExitOK || !strings.Contains(out, j.ID) {
		t.Fatalf("watch with the controller's identity: exit %d: %s %s", code, out, errOut)
	}
	code, _, errOut = run(t.Context(), "exec", "watch", "--nats-url", ctrl.NATSURL(), "--count", "1")
	if code != ExitError || !strings.Contains(errOut, "nats.url") {
		t.Fatalf("watch without credentials: exit %d: %s", code, errOut)
	}
}
