package tlsnet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/internal/tlstest"
)

// TestExternalServerTLS: with nats.url, nats.tls configures the
// controller's client side. Against an external server that verifies
// client certificates, the controller starts with a certificate of the
// server's client CA and an agent runs a job through it; with a
// certificate of another CA, or without nats.tls.ca_file, Start fails.
func TestExternalServerTLS(t *testing.T) {
	serverCA := tlstest.NewCA(t, "server")
	clientCA := tlstest.NewCA(t, "clients")
	otherCA := tlstest.NewCA(t, "other")
	srvCert, srvKey := serverCA.Server(t, "nats")
	ctlCert, ctlKey := clientCA.Client(t, "ax-controller")
	agentCert, agentKey := clientCA.Client(t, "edge-ext")
	badCert, badKey := otherCA.Client(t, "ax-controller")

	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvCert, KeyFile: srvKey, CaFile: clientCA.File, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t, func(o *server.Options) { o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true })
	url := "tls://" + ns.Addr()

	start := func(tls controller.TLSConfig) (*controller.Controller, error) {
		cfg := controller.DefaultConfig()
		cfg.NATS.URL = url
		cfg.NATS.TLS = tls
		cfg.HeartbeatInterval = 200 * time.Millisecond
		cfg.AgentOfflineAfter = 2 * time.Second
		cfg.Logger = testutil.Logger()
		ctl, err := controller.New(cfg)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ctl.Start(ctx); err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = ctl.Close() })
		return ctl, nil
	}

	refusedCfgs := []struct {
		name string
		tls  controller.TLSConfig
	}{
		{"certificate of another CA", controller.TLSConfig{CAFile: serverCA.File, CertFile: badCert, KeyFile: badKey}},
		{"no client certificate", controller.TLSConfig{CAFile: serverCA.File}},
		{"server CA not trusted", controller.TLSConfig{CertFile: ctlCert, KeyFile: ctlKey}},
	}
	for _, c := range refusedCfgs {
		t.Run(c.name, func(t *testing.T) {
			if _, err := start(c.tls); err == nil {
				t.Fatal("controller started, want its connection refused")
			} else {
				t.Logf("start: %v", err)
			}
		})
	}
	t.Run("missing ca_file names the key", func(t *testing.T) {
		_, err := start(controller.TLSConfig{CAFile: serverCA.File + ".missing"})
		if !errors.Is(err, controller.ErrConfig) {
			t.Fatalf("start: %v, want ErrConfig", err)
		}
	})

	t.Run("right certificate", func(t *testing.T) {
		ctl, err := start(controller.TLSConfig{CAFile: serverCA.File, CertFile: ctlCert, KeyFile: ctlKey})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		runAgent(t, "edge-ext", url, agent.TLSConfig{CAFile: serverCA.File, CertFile: agentCert, KeyFile: agentKey})
		testutil.Eventually(t, 30*time.Second, "edge-ext online", online(ctl, "edge-ext"))
		runJob(t, ctl, "edge-ext", "ext-tls-job")
	})
}
