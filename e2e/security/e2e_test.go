package security

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/agenttest"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// stack is a controller with nats.auth: nkeys and its HTTP API.
type stack struct {
	ctl *controller.Controller
	api *client.Client
}

// startStack starts the stack with its store in dir and its NATS server
// on port (-1: a random one); opts change the config before the start.
func startStack(t *testing.T, dir string, port int, opts ...func(*controller.Config)) *stack {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.DataDir = dir
	cfg.NATS.Port = port
	cfg.NATS.Auth = auth.ModeNKeys
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 2 * time.Second
	cfg.Logger = testutil.Logger()
	for _, o := range opts {
		o(&cfg)
	}
	ctl := apitest.Start(t, cfg)
	h, err := api.NewHandler(api.Options{Backend: ctl, Logger: testutil.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return &stack{ctl: ctl, api: c}
}

// enroll enrolls id through the API and writes its seed file (0600).
func (s *stack) enroll(t *testing.T, id string, req auth.EnrollRequest) string {
	t.Helper()
	en, err := s.api.EnrollAgent(testutil.Context(t, 60*time.Second), id, req)
	if err != nil {
		t.Fatalf("enroll %s: %v", id, err)
	}
	path := filepath.Join(t.TempDir(), id+".nk")
	if err := auth.WriteSecretFile(path, auth.SeedFile(id, []byte(en.Seed))); err != nil {
		t.Fatal(err)
	}
	return path
}

// embeddedConfig is the config of a controller with its store in dir and
// its embedded NATS server on a random port, nats.auth mode.
func embeddedConfig(dir, mode string) controller.Config {
	cfg := controller.DefaultConfig()
	cfg.DataDir = dir
	cfg.NATS.Port = -1
	cfg.NATS.Auth = mode
	cfg.Logger = testutil.Logger()
	return cfg
}

func noop(context.Context, agent.Task) agent.Result { return agent.Result{} }

// runAgent runs a real agent with only the credentials in creds.
func runAgent(t *testing.T, id, url, creds string) {
	t.Helper()
	cfg := agenttest.Config(id, url, t.TempDir())
	cfg.NATS.Creds = creds
	agenttest.Start(t, cfg, agent.WithHandler("noop", noop))
}

func online(s *stack, id string) func() bool {
	return func() bool {
		as, err := s.ctl.ListAgents(context.Background())
		return err == nil && slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == id && a.Online })
	}
}

func offline(s *stack, id string) func() bool {
	return func() bool {
		as, err := s.ctl.ListAgents(context.Background())
		return err == nil && slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == id && !a.Online })
	}
}

// runJob creates an asap job on agent id and waits for its execution to succeed.
func runJob(t *testing.T, s *stack, id, name string) {
	t.Helper()
	j, err := s.ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: name, Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: id}})
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, "an execution of "+name+" in SUCCESS", func() bool {
		es, _, err := s.ctl.ListExecutions(context.Background(), controller.ExecFilter{JobID: j.ID, Limit: 10})
		return err == nil && slices.ContainsFunc(es, func(e protocol.Execution) bool { return e.State == protocol.StateSuccess })
	})
}

// connectRaw connects to url with the seed file alone (no reconnects).
func connectRaw(url, seed string) (*nats.Conn, error) {
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, opt, nats.MaxReconnects(0))
}

// TestEnrolledAgentRunsJobs: an agent enrolled through the API runs jobs to
// SUCCESS with only its own credentials; an unauthenticated client is
// refused; after a controller restart the enrollment still holds; after a
// revocation the agent is cut off, and a rotated key retires the old one.
func TestEnrolledAgentRunsJobs(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	s := startStack(t, dir, port)
	url := s.ctl.NATSURL()

	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected to a server with nats.auth: nkeys")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("no credentials: %v, want an authorization violation", err)
	}

	seed := s.enroll(t, "edge-s", auth.EnrollRequest{Labels: map[string]string{"site": "lab"}})
	runAgent(t, "edge-s", url, seed)
	testutil.Eventually(t, 30*time.Second, "edge-s online", online(s, "edge-s"))
	runJob(t, s, "edge-s", "first")

	// The identities survive a controller restart (same data dir, same port).
	if err := s.ctl.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{auth.ControllerSeedFile, auth.RegistryFile} {
		st, err := os.Stat(filepath.Join(dir, controller.AuthDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, m)
		}
	}
	s = startStack(t, dir, port)
	testutil.Eventually(t, 30*time.Second, "edge-s back online after the controller restart", online(s, "edge-s"))
	runJob(t, s, "edge-s", "after-restart")

	// Enrolling again without rotate is refused; the agent keeps working.
	if _, err := s.api.EnrollAgent(testutil.Context(t, 60*time.Second), "edge-s", auth.EnrollRequest{}); !errors.Is(err, client.ErrExists) {
		t.Fatalf("second enrollment without rotate: %v, want ErrExists", err)
	}

	// Revocation cuts the agent off and refuses its key.
	if _, err := s.api.RevokeAgent(testutil.Context(t, 60*time.Second), "edge-s"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, "edge-s offline after revocation", offline(s, "edge-s"))
	if _, err := connectRaw(url, seed); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("revoked key: %v, want an authorization violation", err)
	}
	if _, err := s.api.RevokeAgent(testutil.Context(t, 60*time.Second), "edge-s"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second revoke: %v, want ErrNotFound", err)
	}
	// A new enrollment gives a new key; the old one stays refused.
	seed2 := s.enroll(t, "edge-s", auth.EnrollRequest{})
	if _, err := connectRaw(url, seed); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("old key after re-enrollment: %v", err)
	}
	nc, err := connectRaw(url, seed2)
	if err != nil {
		t.Fatalf("new key: %v", err)
	}
	nc.Close()
}

// TestEnrollWithoutAuthRefused: a controller with nats.auth none issues no identities.
func TestEnrollWithoutAuthRefused(t *testing.T) {
	cfg := embeddedConfig(t.TempDir(), auth.ModeNone)
	ctl := apitest.Start(t, cfg)
	if _, err := ctl.EnrollAgent(testutil.Context(t, 60*time.Second), "edge-x", auth.EnrollRequest{}); !errors.Is(err, controller.ErrConflict) {
		t.Fatalf("enroll without auth: %v, want ErrConflict", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, controller.AuthDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("auth dir created without auth: %v", err)
	}
}

// TestBindBeyondLoopbackNeedsAuth: nats.host beyond loopback is refused
// with nats.auth none and accepted with nkeys; nkeys with an external URL
// is refused.
func TestBindBeyondLoopbackNeedsAuth(t *testing.T) {
	for _, tc := range []struct {
		name, host, auth, url string
		ok                    bool
	}{
		{"loopback without auth", "127.0.0.1", "", "", true},
		{"all interfaces without auth", "0.0.0.0", auth.ModeNone, "", false},
		{"all interfaces with nkeys", "0.0.0.0", auth.ModeNKeys, "", true},
		{"unknown mode", "127.0.0.1", "jwt", "", false},
		{"nkeys with an external server", "127.0.0.1", auth.ModeNKeys, "nats://nats-1:4222", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := controller.DefaultConfig()
			cfg.DataDir = "/data"
			cfg.NATS.Host, cfg.NATS.Auth, cfg.NATS.URL = tc.host, tc.auth, tc.url
			err := cfg.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, controller.ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}
