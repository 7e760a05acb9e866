package security

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/agenttest"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// refused reads ax_agent_requests_refused_total{endpoint, reason}.
func refused(t *testing.T, ctl *controller.Controller, endpoint, reason string) float64 {
	t.Helper()
	mfs, err := ctl.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ax_agent_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["endpoint"] == endpoint && l["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestRespondersAnswerOnlyTheAgentsInbox: without accounts (nats.auth
// none, one account for everyone), the registration and heartbeat
// responders answer only on the agent's own inbox prefix. Requests whose
// reply is a KV key, an event subject, another agent's inbox or the
// global inbox are dropped unprocessed and counted; nothing is published
// on those subjects.
func TestRespondersAnswerOnlyTheAgentsInbox(t *testing.T) {
	cfg := embeddedConfig(t.TempDir(), auth.ModeNone)
	ctl := apitest.Start(t, cfg)
	nc, err := nats.Connect(ctl.NATSURL(), nats.CustomInboxPrefix(protocol.InboxPrefix("edge-z")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	replies := []string{"$KV." + protocol.BucketJobs + ".j1", protocol.EventSubject(protocol.StateFailed, "j1"),
		protocol.CommandSubject("edge-b"), protocol.InboxPrefix("edge-b") + ".x", "_INBOX.x", protocol.InboxPrefix("edge-z")}
	// spy listens on every reply subject above and on the agent's own
	// inbox, in one channel so that arrival order is kept; not on ">",
	// which in the one shared account also carries the controller's own
	// JetStream API replies and advisories.
	spy := make(chan *nats.Msg, 64)
	for _, subj := range append([]string{protocol.InboxPrefix("edge-z") + ".>"}, replies...) {
		if _, err := nc.ChanSubscribe(subj, spy); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ endpoint, subject string }{
		{"register", protocol.RegisterSubject("edge-z")},
		{"heartbeat", protocol.HeartbeatSubject("edge-z")},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			before := refused(t, ctl, tc.endpoint, "reply")
			for _, r := range replies {
				if err := nc.PublishRequest(tc.subject, r, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			testutil.Eventually(t, 30*time.Second, "the requests counted as dropped", func() bool {
				return refused(t, ctl, tc.endpoint, "reply") == before+float64(len(replies))
			})
			// A request on the agent's own inbox is answered; the
			// responder handles requests in order, so an answer to a
			// dropped one would have reached spy before this one.
			m, err := nc.Request(tc.subject, []byte(`{}`), 10*time.Second)
			if err != nil {
				t.Fatalf("request on the agent's inbox: %v", err)
			}
			for done := false; !done; {
				select {
				case got := <-spy:
					if got.Subject == m.Subject {
						done = true
						break
					}
					t.Errorf("the controller published on %s (%s)", got.Subject, got.Data)
				case <-time.After(10 * time.Second):
					t.Fatalf("the answer on the agent's inbox did not reach spy")
				}
			}
		})
	}
}

// TestAgentKeepsRetryingAfterAuthErrors: the controller restarts with a
// registry that does not know the agent (as one started without
// auth/agents.json did): the agent's key is refused again and again, and
// the agent says so. Once the controller is back with its registry, the
// agent connects and runs jobs: it never gives up.
func TestAgentKeepsRetryingAfterAuthErrors(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	s := startStack(t, dir, port)
	seed := s.enroll(t, "edge-r", auth.EnrollRequest{})
	var logs lockedBuf
	cfg := agenttest.Config("edge-r", s.ctl.NATSURL(), t.TempDir())
	cfg.NATS.Creds = seed
	agenttest.Start(t, cfg, agent.WithHandler("noop", noop), agent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	testutil.Eventually(t, 30*time.Second, "edge-r online", online(s, "edge-r"))

	if err := s.ctl.Close(); err != nil {
		t.Fatal(err)
	}
	regPath := filepath.Join(dir, controller.AuthDir, auth.RegistryFile)
	saved, err := os.ReadFile(regPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteSecretFile(regPath, []byte(`{"version":1,"agents":[]}`)); err != nil {
		t.Fatal(err)
	}
	s = startStack(t, dir, port)
	const refusedMsg = "NATS refused the agent's credentials"
	testutil.Eventually(t, 30*time.Second, "edge-r refused three times, saying why", func() bool {
		return strings.Count(logs.String(), refusedMsg) >= 3
	})
	if !strings.Contains(strings.ToLower(logs.String()), "authorization violation") {
		t.Errorf("the log does not name the server's reason:\n%s", logs.String())
	}
	if err := s.ctl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteSecretFile(regPath, saved); err != nil {
		t.Fatal(err)
	}
	s = startStack(t, dir, port)
	testutil.Eventually(t, 60*time.Second, "edge-r back online after the registry is restored", online(s, "edge-r"))
	runJob(t, s, "edge-r", "after-auth-errors")
}

// TestControllerRefusesMissingRegistry: with nats.auth: nkeys, a
// controller whose key exists but whose agents.json does not refuses to
// start, naming the file; a first start writes an empty registry.
func TestControllerRefusesMissingRegistry(t *testing.T) {
	dir := t.TempDir()
	s := startStack(t, dir, -1)
	if err := s.ctl.Close(); err != nil {
		t.Fatal(err)
	}
	regPath := filepath.Join(dir, controller.AuthDir, auth.RegistryFile)
	if _, err := os.Stat(regPath); err != nil {
		t.Fatalf("the first start wrote no registry: %v", err)
	}
	if err := os.Remove(regPath); err != nil {
		t.Fatal(err)
	}
	cfg := embeddedConfig(dir, auth.ModeNKeys)
	ctl, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = ctl.Start(testutil.Context(t, 60*time.Second))
	if err == nil {
		_ = ctl.Close()
		t.Fatal("the controller started without its registry")
	}
	if !errors.Is(err, auth.ErrRegistryMissing) || !strings.Contains(err.Error(), regPath) {
		t.Fatalf("error %q does not name %s", err, regPath)
	}
}

// TestStoreFollowsAuthMode: the embedded server keeps ax's streams in the
// global account without auth and in the ax account with nkeys; switching
// nats.auth either way keeps the jobs.
func TestStoreFollowsAuthMode(t *testing.T) {
	dir := t.TempDir()
	start := func(mode string) *controller.Controller {
		cfg := embeddedConfig(dir, mode)
		ctl := apitest.Start(t, cfg)
		return ctl
	}
	ctl := start(auth.ModeNone)
	j, err := ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: "kept", Handler: "noop",
		Schedule: schedule.Spec{Every: "1h"}, Target: protocol.Target{Agent: "edge-k"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{auth.ModeNKeys, auth.ModeNone, auth.ModeNKeys} {
		if err := ctl.Close(); err != nil {
			t.Fatal(err)
		}
		ctl = start(mode)
		if _, err := ctl.GetJob(testutil.Context(t, 60*time.Second), j.ID); err != nil {
			t.Fatalf("after switching to nats.auth %s: %v", mode, err)
		}
	}
	_ = ctl.Close()
	if _, err := os.Stat(filepath.Join(dir, "jetstream", auth.AccountAX)); err != nil {
		t.Fatalf("no store of account %s: %v", auth.AccountAX, err)
	}
}
