package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/internal/natscreds"
)

// startEmbedded runs the embedded nats-server with JetStream, its file store
// under cfg.DataDir, listening on cfg.NATS.Host:Port (loopback by default),
// serving TLS when nats.tls is set (client certificates required with
// nats.tls.verify_clients).
// With na (nats.auth: nkeys) the server has the ax account, which holds the
// controller and every stream and bucket, and one account per enrolled
// agent (auth.AccountsConfig); without, everything is in the global
// account. The options are returned so that the accounts can be reloaded.
// The server logs through log (natsLogger).
func startEmbedded(cfg Config, na *fleet.Auth, log server.Logger) (*server.Server, *server.Options, error) {
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
	}
	from, to := globalAccount, auth.AccountAX
	if na == nil {
		from, to = to, from
	}
	if err := moveAccountStore(cfg.DataDir, from, to); err != nil {
		return nil, nil, fmt.Errorf("embedded nats: %w", err)
	}
	if err := na.Configure(opts); err != nil {
		return nil, nil, fmt.Errorf("embedded nats: %w", err)
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
	srv.SetLoggerV2(log, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, nil, fmt.Errorf("embedded nats: not ready within 30s (port %d in use or data_dir %q unusable?)", cfg.NATS.Port, cfg.DataDir)
	}
	return srv, opts, nil
}

// globalAccount is nats-server's account of clients when no accounts are configured.
const globalAccount = "$G"

// moveAccountStore renames the JetStream store of account from to that of
// account to under dataDir when only from has one: the streams and buckets
// of ax are in the global account with nats.auth none and in the ax
// account with nkeys, and switching modes keeps them. With both present
// nothing is moved (the store of the current mode is used).
func moveAccountStore(dataDir, from, to string) error {
	base := filepath.Join(dataDir, server.JetStreamStoreDir)
	src, dst := filepath.Join(base, from), filepath.Join(base, to)
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("move the JetStream store of account %s to account %s: %w", from, to, err)
	}
	return nil
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
			// A .creds file (operator mode) or an NKey seed file.
			opt, err := natscreds.Option(cfg.NATS.CredsFile)
			if err != nil {
				return nil, nil, configErr("nats.creds_file", "%v", err)
			}
			opts = append(opts, opt)
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
