package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/pkg/clock"
)

// shutdownTimeout bounds the graceful stop of the HTTP server, and
// failedShutdownWait its stop after the controller failed (its store
// cannot be written: the requests in flight cannot succeed).
const (
	shutdownTimeout    = 15 * time.Second
	failedShutdownWait = time.Second
)

func newServeCmd(g *globals) *cobra.Command {
	var printConfig bool
	var pprofListen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller: embedded (or external) NATS, state machine, HTTP API",
		Long: "serve starts the controller with the effective configuration (--config file, AX_* env, flags) " +
			"and serves the HTTP API on api.listen (HTTPS with api.tls) until SIGINT or SIGTERM.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := newViper(g.config, cmd.Flags(), map[string]string{
				"listen": "api.listen", "data-dir": "data_dir", "node": "node",
				"nats-url": "nats.url", "nats-host": "nats.host", "nats-port": "nats.port", "nats-auth": "nats.auth",
				"shards": "shards", "log-level": "log.level", "log-format": "log.format",
				"lease-ttl": "lease_ttl", "lease-renew-interval": "lease_renew_interval", "ack-wait": "ack_wait",
			})
			if err != nil {
				return err
			}
			cfg, err := loadConfig(v)
			if err != nil {
				return err
			}
			if printConfig {
				return writeYAML(g.io.Out, cfg.masked())
			}
			if pprofListen != "" {
				stop, err := startPprof(pprofListen)
				if err != nil {
					return err
				}
				defer stop()
			}
			return serve(cmd.Context(), cfg, newLogger(g.io.Err, cfg.Log))
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&printConfig, "print-config", false, "print the effective configuration (secrets masked) and exit")
	fl.String("listen", "", "API listen address host:port (api.listen, default "+DefaultListen+")")
	fl.String("data-dir", "", "embedded NATS store directory (data_dir)")
	fl.String("node", "", "node name used in job ids (node)")
	fl.String("nats-url", "", "external NATS URL; empty runs an embedded server (nats.url)")
	fl.String("nats-host", "", "embedded NATS listen host (nats.host)")
	fl.Int("nats-port", 0, "embedded NATS port, -1 for a random one (nats.port)")
	fl.String("nats-auth", "", "embedded NATS auth: none (loopback only) or nkeys (nats.auth)")
	fl.Int("shards", 0, "number of report shards, fixed once the cluster exists (shards)")
	fl.String("lease-ttl", "", "TTL of shard and group-job leases, e.g. 15s (lease_ttl)")
	fl.String("lease-renew-interval", "", "how often a replica renews its shard leases, default lease_ttl/3 (lease_renew_interval)")
	fl.String("ack-wait", "", "how long a report may stay unacknowledged before redelivery, e.g. 30s (ack_wait)")
	fl.String("log-level", "", "debug, info, warn or error (log.level)")
	fl.String("log-format", "", "text or json (log.format)")
	fl.StringVar(&pprofListen, "pprof-listen", "", "serve Go profiles (/debug/pprof/) on this loopback host:port, for diagnosis; off by default")
	return cmd
}

func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the controller and its API until ctx ends, or until the
// controller fails (its store cannot be written), which it returns.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.checkAuth(); err != nil {
		return err
	}
	tokens := cfg.allTokens()
	https := cfg.API.TLS.CertFile != ""
	if https {
		// Checked before anything starts, so that a bad file names its key.
		if _, err := tls.LoadX509KeyPair(cfg.API.TLS.CertFile, cfg.API.TLS.KeyFile); err != nil {
			return configErr("api.tls.cert_file", "%s with key %s: %v", cfg.API.TLS.CertFile, cfg.API.TLS.KeyFile, err)
		}
	}
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return configErr("api.listen", "%v", err)
	}
	defer ln.Close()

	cc := cfg.controllerConfig()
	cc.Logger = log
	ctrl, err := controller.New(cc)
	if err != nil {
		return fmt.Errorf("new controller: %w", err)
	}
	defer func() {
		if err := ctrl.Close(); err != nil {
			log.Error("close controller", "err", err)
		}
	}()
	if gcPaceOn() {
		go newGCPace(clock.Real{}).run(ctx)
	}
	if err := startController(ctx, ctrl); err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM, SIGINT) before it was ready: an orderly
			// stop, not a failure to start.
			log.Info("stopped before ready", "err", err)
			return nil
		}
		return fmt.Errorf("start controller: %w", err)
	}
	go newMemTrim(clock.Real{}).run(ctx)
	h, err := api.NewHandler(api.Options{Backend: ctrl, Metrics: ctrl.Registry(), Registerer: ctrl.Registry(), Tokens: tokens, Logger: log})
	if err != nil {
		return fmt.Errorf("%w: api.%v", ErrConfig, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
	}
	auth := "off (loopback only)"
	if len(tokens) > 0 {
		auth = fmt.Sprintf("bearer tokens (%d)", len(tokens))
	}
	log.Info("api listening", "addr", ln.Addr().String(), "https", https, "auth", auth, "nats", ctrl.NATSURL(), "data_dir", cfg.DataDir)

	served := make(chan error, 1)
	go func() {
		if https {
			served <- srv.ServeTLS(ln, cfg.API.TLS.CertFile, cfg.API.TLS.KeyFile)
			return
		}
		served <- srv.Serve(ln)
	}()
	var failed error
	select {
	case err := <-served:
		return fmt.Errorf("api server: %w", err)
	case <-ctx.Done():
	case <-ctrl.Failed():
		// The store cannot be written (controller/storefailed.go): stop, so
		// that the supervisor starts the controller again.
		failed = ctrl.Err()
	}
	log.Info("shutting down")
	wait := shutdownTimeout
	if failed != nil {
		// Requests still waiting on the store would only time out.
		wait = failedShutdownWait
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		if failed == nil {
			log.Warn("api shutdown", "err", err)
		}
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api server: %w", err)
	}
	return failed
}
