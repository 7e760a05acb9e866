package controller

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startEmbedded runs the embedded nats-server with JetStream, its file store
// under cfg.DataDir, listening on cfg.NATS.Host:Port (loopback by default),
// serving TLS when nats.tls is set (client certificates required with
// nats.tls.verify_clients).
// users, when not nil, are its NKey users (nats.auth: nkeys); the options
// are returned so that the users can be reloaded.
func startEmbedded(cfg Config, users []*server.NkeyUser) (*server.Server, *server.Options, error) {
	port := cfg.NATS.Port
	if port == -1 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName:         "ax-controller-" + cfg.Node,
		Host:               cfg.NATS.Host,
		Port:               port,
		JetStream:          true,
		StoreDir:           cfg.DataDir,
		NoLog:              true,
		NoSigs:             true,
		MaxPayload:         1 << 20,
		JetStreamMaxMemory: 256 << 20,
		Nkeys:              users,
	}
	if cfg.NATS.TLS.Enabled() {
		tc, err := cfg.NATS.TLS.serverTLS()
		if err != nil {
			return nil, nil, err
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, cfg.NATS.TLS.VerifyClients
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, nil, fmt.Errorf("embedded nats: not ready within 30s (port %d in use or data_dir %q unusable?)", cfg.NATS.Port, cfg.DataDir)
	}
	return srv, opts, nil
}

// Async publishing (events, batched execution writes): at most
// asyncMaxPending unacknowledged publishes; a publish waits up to
// asyncStallWait for room; a PubAck not received within asyncAckTimeout
// fails its future, so a waiter never hangs.
const (
	asyncMaxPending = 16384
	asyncStallWait  = 5 * time.Second
	asyncAckTimeout = 30 * time.Second
)

// connect opens the controller's NATS connection: in process to the
// embedded server, or over the network to cfg.NATS.URL (with nats.tls).
// The in-process connection never leaves the process: nats-server does not
// require TLS (nor a client certificate) on it, so it uses none.
// extra are added to the connection options (the controller's identity).
func connect(cfg Config, srv *server.Server, errh func(error), extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name("ax-controller-" + cfg.Node),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
	}
	url := cfg.NATS.URL
	if srv != nil {
		opts = append(opts, nats.InProcessServer(srv))
		// nats://, also when the server serves TLS (its ClientURL is then tls://).
		url = "nats://" + srv.Addr().String()
	} else {
		opts = append(opts, nats.RetryOnFailedConnect(false))
		if cfg.NATS.CredsFile != "" {
			opts = append(opts, nats.UserCredentials(cfg.NATS.CredsFile))
		}
		tlsOpts, err := cfg.NATS.TLS.clientOptions()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, tlsOpts...)
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect nats %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
		errh(err)
	}), jetstream.WithPublishAsyncMaxPending(asyncMaxPending), jetstream.WithPublishAsyncTimeout(asyncAckTimeout))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
