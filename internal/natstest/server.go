package natstest

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyWait bounds how long a test server may take to accept connections:
// a clustered one waits for its routes and JetStream, which took over 10 s
// in a -race CI run with other packages beside it.
const readyWait = 30 * time.Second

// Server is an embedded nats-server with JetStream, owned by one test.
type Server struct {
	tb   testing.TB
	opts server.Options
	srv  *server.Server
}

// Option changes the server options before the first start.
type Option func(*server.Options)

// baseOptions are the options of every server this package runs, a lone
// one or a cluster node: JetStream with its store in a temp dir of tb, on
// 127.0.0.1, quiet, 1 MiB payloads, 256 MiB memory and 4 GiB file store.
func baseOptions(tb testing.TB) server.Options {
	return server.Options{
		Host:               "127.0.0.1",
		JetStream:          true,
		StoreDir:           tb.TempDir(),
		NoLog:              true,
		NoSigs:             true,
		MaxPayload:         1 << 20,
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  4 << 30,
	}
}

// Start runs a JetStream server on 127.0.0.1 with a random port and a store
// in a temp dir; it is shut down when the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	o := baseOptions(tb)
	o.Port = server.RANDOM_PORT
	for _, fn := range opts {
		fn(&o)
	}
	s := &Server{tb: tb, opts: o}
	s.start()
	// Keep the port across restarts.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	tb.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	o := s.opts
	srv, err := server.NewServer(&o)
	if err != nil {
		s.tb.Fatalf("natstest: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyWait) {
		srv.Shutdown()
		s.tb.Fatalf("natstest: server not ready within %s", readyWait)
	}
	s.srv = srv
}

// URL is the client URL, nats://127.0.0.1:<port>.
func (s *Server) URL() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)) }

// StoreDir is the JetStream store directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Server returns the running server (nil while stopped).
func (s *Server) Server() *server.Server { return s.srv }

// Stop shuts the server down; it is safe to call twice.
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server if it runs and starts it again on the same port
// and store.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

// String describes the server for test logs.
func (s *Server) String() string {
	return fmt.Sprintf("nats-server at %s (store %s)", s.URL(), s.opts.StoreDir)
}

// JetStream connects to the server at url with opts and returns the
// connection (closed when the test ends) and its JetStream context.
func JetStream(tb testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, js := Connect(tb, url, opts...)
	tb.Cleanup(nc.Close)
	return nc, js
}

// Connect is JetStream for a short look at the server, in a helper that a
// poll may call on every try: the caller closes the connection, which is
// not kept open until the test ends.
func Connect(tb testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatalf("nats connect %s: %v", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		tb.Fatalf("jetstream: %v", err)
	}
	return nc, js
}
