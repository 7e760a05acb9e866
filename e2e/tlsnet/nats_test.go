package tlsnet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/internal/tlstest"
)

// natsAddr is host:port of a NATS URL.
func natsAddr(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// connectOnce connects to url once (no reconnects) with opts.
func connectOnce(url string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0), nats.Timeout(5*time.Second))...)
	if err == nil {
		nc.Close()
	}
	return err
}

// refused runs a real agent with tc through a counting proxy, waits until
// three of its connections have ended, and checks that it never registered.
func refused(t *testing.T, ctl *controller.Controller, id string, tc agent.TLSConfig) {
	t.Helper()
	p := newCountingProxy(t, natsAddr(t, ctl.NATSURL()))
	runAgent(t, id, p.URL(), tc)
	testutil.Eventually(t, 30*time.Second, "three ended connections of "+id, func() bool { return p.ended.Load() >= 3 })
	if known(ctl, id) {
		t.Fatalf("agent %s registered although its connections were refused", id)
	}
}

// TestVerifyClients: with nats.tls.verify_clients the embedded server
// refuses a client certificate from another CA and a client without one;
// an agent with a certificate from nats.tls.ca_file registers and runs a
// job to SUCCESS.
func TestVerifyClients(t *testing.T) {
	serverCA := tlstest.NewCA(t, "server")
	clientCA := tlstest.NewCA(t, "clients")
	otherCA := tlstest.NewCA(t, "other")
	srvCert, srvKey := serverCA.Server(t, "nats")
	goodCert, goodKey := clientCA.Client(t, "edge-good")
	badCert, badKey := otherCA.Client(t, "edge-bad")

	ctl := startController(t, controller.TLSConfig{CertFile: srvCert, KeyFile: srvKey, CAFile: clientCA.File, VerifyClients: true})
	url := ctl.NATSURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("NATSURL = %q, want a tls:// URL", url)
	}

	clients := []struct {
		name string
		tc   agent.TLSConfig
		ok   bool
	}{
		{"certificate from another CA", agent.TLSConfig{CAFile: serverCA.File, CertFile: badCert, KeyFile: badKey}, false},
		{"no client certificate", agent.TLSConfig{CAFile: serverCA.File}, false},
		{"certificate from ca_file", agent.TLSConfig{CAFile: serverCA.File, CertFile: goodCert, KeyFile: goodKey}, true},
	}
	for _, c := range clients {
		t.Run("raw client: "+c.name, func(t *testing.T) {
			opts := []nats.Option{nats.RootCAs(c.tc.CAFile)}
			if c.tc.CertFile != "" {
				opts = append(opts, nats.ClientCert(c.tc.CertFile, c.tc.KeyFile))
			}
			err := connectOnce(url, opts...)
			if c.ok && err != nil {
				t.Fatalf("connect: %v", err)
			}
			if !c.ok && err == nil {
				t.Fatal("connected, want the server to refuse the client")
			}
			t.Logf("connect: %v", err)
		})
	}

	// Go's TLS client sends no certificate whose issuer the server does not
	// list as acceptable; present the foreign one anyway, as an attacker would.
	t.Run("raw client: certificate from another CA, presented regardless", func(t *testing.T) {
		bad, err := tls.LoadX509KeyPair(badCert, badKey)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(serverCA.File)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("read %s: %v", serverCA.File, err)
		}
		err = connectOnce(url, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &bad, nil }}))
		if err == nil {
			t.Fatal("connected with a certificate from another CA")
		}
		t.Logf("connect: %v", err)
	})

	t.Run("agent with a certificate from another CA is refused", func(t *testing.T) {
		refused(t, ctl, "edge-bad", clients[0].tc)
	})
	t.Run("agent without a client certificate is refused", func(t *testing.T) {
		refused(t, ctl, "edge-nocert", clients[1].tc)
	})
	t.Run("agent with the right certificate runs a job", func(t *testing.T) {
		runAgent(t, "edge-good", url, clients[2].tc)
		testutil.Eventually(t, 30*time.Second, "edge-good online", online(ctl, "edge-good"))
		runJob(t, ctl, "edge-good", "tls-job")
	})
}

// TestPlainClientAgainstTLSServer: a client without nats.tls cannot connect
// to a TLS server (it does not trust the server's private CA), and a real
// agent without nats.tls never registers; with nats.tls.ca_file alone (no
// verify_clients) it does.
func TestPlainClientAgainstTLSServer(t *testing.T) {
	ca := tlstest.NewCA(t, "server")
	cert, key := ca.Server(t, "nats")
	ctl := startController(t, controller.TLSConfig{CertFile: cert, KeyFile: key})
	plainURL := "nats://" + natsAddr(t, ctl.NATSURL())

	err := connectOnce(plainURL)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("plain connect: %v, want an unknown-authority error", err)
	}

	t.Run("agent without nats.tls is refused", func(t *testing.T) {
		refused(t, ctl, "edge-plain", agent.TLSConfig{})
	})
	t.Run("agent with nats.tls.ca_file runs a job", func(t *testing.T) {
		runAgent(t, "edge-ca", plainURL, agent.TLSConfig{CAFile: ca.File})
		testutil.Eventually(t, 30*time.Second, "edge-ca online", online(ctl, "edge-ca"))
		runJob(t, ctl, "edge-ca", "tls-ca-job")
	})
}
