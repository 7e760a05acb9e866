package auth_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/streams"
)

// env is a real embedded server with accounts: the controller's identity,
// a registry, and an "admin" connection of the ax account standing in for
// the controller (with its consumer gateway).
type env struct {
	t       *testing.T
	dir     string
	reg     *auth.Registry
	ctlPub  string
	ctlSeed string
	opts    *server.Options
	srv     *server.Server
	admin   *nats.Conn
	ajs     jetstream.JetStream
}

func newEnv(t *testing.T, agents ...string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir}
	var err error
	e.ctlPub, e.ctlSeed, err = auth.ControllerIdentity(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	e.reg, err = auth.OpenRegistry(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	e.opts = &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: filepath.Join(dir, "js"),
		NoLog: true, NoSigs: true, JetStreamMaxMemory: 64 << 20,
	}
	if err := auth.Configure(e.opts, e.ctlPub, nil); err != nil {
		t.Fatal(err)
	}
	e.srv, err = server.NewServer(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.Start()
	if !e.srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { e.srv.Shutdown(); e.srv.WaitForShutdown() })
	opt, err := nats.NkeyOptionFromSeed(e.ctlSeed)
	if err != nil {
		t.Fatal(err)
	}
	e.admin, err = nats.Connect(e.srv.ClientURL(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.admin.Close)
	e.ajs, err = jetstream.New(e.admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams.Ensure(ctx(t), e.ajs, streams.Config{}); err != nil {
		t.Fatal(err)
	}
	// The admin connection stands in for the controller's consumer gateway too.
	gw, err := auth.ServeGateway(e.admin, "ax-controller", 5*time.Second, auth.GatewayHooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Unsubscribe() })
	for _, id := range agents {
		e.enroll(id)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// enroll enrolls id, applies the users and writes its seed file.
func (e *env) enroll(id string) string {
	e.t.Helper()
	en, err := e.reg.Enroll(id, auth.EnrollRequest{}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	e.apply()
	path := filepath.Join(e.dir, id+".nk")
	if err := auth.WriteSecretFile(path, auth.SeedFile(id, []byte(en.Seed))); err != nil {
		e.t.Fatal(err)
	}
	return path
}

func (e *env) apply() {
	e.t.Helper()
	if err := auth.Apply(e.srv, e.opts, e.ctlPub, e.reg.List()); err != nil {
		e.t.Fatal(err)
	}
}

// agentConn is agent id's connection with only its own credentials and
// its own inbox prefix; errs receives its async errors.
type agentConn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error // every async error, for tests that wait for one
}

func (ac *agentConn) onError(err error) {
	select {
	case ac.errs <- err:
	default:
	}
}

func (e *env) connect(id string, extra ...nats.Option) (*agentConn, error) {
	e.t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(e.dir, id+".nk"))
	if err != nil {
		return nil, err
	}
	return e.connectWith(id, append([]nats.Option{opt}, extra...)...)
}

func (e *env) connectWith(id string, extra ...nats.Option) (*agentConn, error) {
	e.t.Helper()
	ac := &agentConn{errs: make(chan error, 64)}
	opts := append([]nats.Option{
		nats.CustomInboxPrefix("_INBOX_ax." + id),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { ac.onError(err) }),
	}, extra...)
	nc, err := nats.Connect(e.srv.ClientURL(), opts...)
	if err != nil {
		return nil, err
	}
	e.t.Cleanup(nc.Close)
	ac.nc = nc
	ac.js, err = jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return ac, nil
}

func (e *env) mustConnect(id string) *agentConn {
	e.t.Helper()
	ac, err := e.connect(id)
	if err != nil {
		e.t.Fatalf("connect %s: %v", id, err)
	}
	return ac
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
