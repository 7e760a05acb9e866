package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// natsLogger is the embedded nats-server's logger (server.Logger): its
// warnings and errors go to the controller's log with component=nats,
// its notices (start-up, listening) at debug. A line about one client
// connection (nats-server prefixes those with the client, "cid:N") is
// logged at debug whatever its level: an agent that retries with a bad
// key must not fill the log.
//
// It also tells storeFailed when a warning or an error says that a
// stream or a consumer can no longer be written (storefailed.go).
// nats-server gives no other signal of these. The lines are recognized by
// their format strings (below), compared whole, and the error is taken
// from the arguments, not from the text; TestEmbeddedStoreFullFails (a
// real full disk) fails when an upgrade of nats-server changes them.
type natsLogger struct {
	log         *slog.Logger
	storeFailed func(error)
}

// The nats-server (v2.15) log lines that mean a stream or a consumer can
// no longer be written until the server restarts. (JetStream disabled
// altogether, after a permission error or out of space, is watched
// without its lines: watchJetStream.)
const (
	// stream.go setWriteErrLocked: account, stream, error. From then on
	// the stream drops every publish without an answer.
	natsStreamWriteError = "JetStream stream '%s > %s' critical write error: %v"
	// jetstream_cluster.go (consumer) setWriteErrLocked: account, stream,
	// consumer, error.
	natsConsumerWriteError = "JetStream consumer '%s > %s > %s' critical write error: %v"
)

// Noticef logs at debug.
func (l natsLogger) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

// Warnf logs at warn (debug for a client's line) and reports a store
// failure.
func (l natsLogger) Warnf(format string, v ...any) { l.emit(slog.LevelWarn, format, v) }

// Fatalf logs at error (the process is not ended) and reports a store
// failure.
func (l natsLogger) Fatalf(format string, v ...any) { l.emit(slog.LevelError, format, v) }

// Errorf logs at error (debug for a client's line) and reports a store
// failure.
func (l natsLogger) Errorf(format string, v ...any) { l.emit(slog.LevelError, format, v) }

// Debugf logs at debug (the server calls it only with debug logging on).
func (l natsLogger) Debugf(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

// Tracef logs at debug (the server calls it only with tracing on).
func (l natsLogger) Tracef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

func (l natsLogger) emit(level slog.Level, format string, v []any) {
	if level >= slog.LevelWarn && l.storeFailed != nil {
		if err := natsStoreFailure(format, v); err != nil {
			l.storeFailed(err)
		}
	}
	if strings.Contains(format, "cid:") {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, v...), "component", "nats")
}

// natsStoreFailure returns the store failure a nats-server log line
// reports (wrapping ErrStoreFailed and the server's error), nil for any
// other line.
func natsStoreFailure(format string, v []any) error {
	arg := func(i int) any {
		if i < len(v) {
			return v[i]
		}
		return nil
	}
	cause := func(i int) error {
		switch a := arg(i).(type) {
		case error:
			return a
		case nil:
			return errNoCause
		default:
			return fmt.Errorf("%v", a)
		}
	}
	switch format {
	case natsStreamWriteError:
		return fmt.Errorf("%w: stream %v: %w", ErrStoreFailed, arg(1), cause(2))
	case natsConsumerWriteError:
		return fmt.Errorf("%w: consumer %v of stream %v: %w", ErrStoreFailed, arg(2), arg(1), cause(3))
	}
	return nil
}

// errNoCause stands for a missing error argument.
var errNoCause = errors.New("no cause given")
