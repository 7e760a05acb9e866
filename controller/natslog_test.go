package controller

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// TestNATSLoggerStoreFailure: the embedded server's log lines that mean
// a stream or a consumer can no longer be written report a failure
// wrapping ErrStoreFailed and the server's own error, at error or warn;
// no other line does, and every line is logged at its level (a client's at
// debug).
func TestNATSLoggerStoreFailure(t *testing.T) {
	enospc := &fs.PathError{Op: "write", Path: "/data/jetstream/$G/streams/KV_ax_execs/msgs/1.blk", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name   string
		format string
		args   []any
		is     []error
		names  string // the failure's message names this
	}{
		{"stream write error", natsStreamWriteError, []any{"$G", "KV_ax_execs", enospc}, []error{ErrStoreFailed, syscall.ENOSPC}, "KV_ax_execs"},
		{"consumer write error", natsConsumerWriteError, []any{"$G", "AX_RPT", "rpt-3", &fs.PathError{Op: "write", Path: "o.dat", Err: fs.ErrPermission}},
			[]error{ErrStoreFailed, fs.ErrPermission}, "consumer rpt-3 of stream AX_RPT"},
		{"write error without its error", natsStreamWriteError, []any{"$G", "AX_EVT"}, []error{ErrStoreFailed, errNoCause}, "AX_EVT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []error
			l := natsLogger{log: slog.New(&recordHandler{}), storeFailed: func(err error) { got = append(got, err) }}
			l.Errorf(tc.format, tc.args...)
			l.Warnf(tc.format, tc.args...)
			l.Noticef(tc.format, tc.args...) // not a level that reports
			if len(got) != 2 {
				t.Fatalf("storeFailed called %d times, want twice (Errorf, Warnf)", len(got))
			}
			for _, target := range tc.is {
				if !errors.Is(got[0], target) {
					t.Errorf("failure %v is not %v", got[0], target)
				}
			}
			if !strings.Contains(got[0].Error(), tc.names) {
				t.Errorf("failure %q does not name %q", got[0], tc.names)
			}
		})
	}

	// Lines that are not a store failure.
	var got []error
	h := &recordHandler{}
	l := natsLogger{log: slog.New(h), storeFailed: func(err error) { got = append(got, err) }}
	l.Errorf("JetStream failed to store a msg on stream '%s > %s': %v", "$G", "AX_RPT", errors.New("maximum bytes exceeded"))
	l.Errorf("127.0.0.1:50412 - cid:9 - \"v1.55.0:go:ax-agent\" - %s", "authentication error")
	l.Warnf("Readloop processing time: %v", "2.1s")
	l.Noticef("Listening for client connections on %s", "127.0.0.1:4222")
	l.Fatalf("Error listening on port: %v", errors.New("address in use"))
	if len(got) != 0 {
		t.Errorf("storeFailed called for lines that are not a store failure: %v", got)
	}
	want := []struct {
		level slog.Level
		msg   string
	}{
		{slog.LevelError, "JetStream failed to store a msg on stream '$G > AX_RPT': maximum bytes exceeded"},
		{slog.LevelDebug, "127.0.0.1:50412 - cid:9 - \"v1.55.0:go:ax-agent\" - authentication error"},
		{slog.LevelWarn, "Readloop processing time: 2.1s"},
		{slog.LevelDebug, "Listening for client connections on 127.0.0.1:4222"},
		{slog.LevelError, "Error listening on port: address in use"},
	}
	if len(h.recs) != len(want) {
		t.Fatalf("%d records logged, want %d", len(h.recs), len(want))
	}
	for i, w := range want {
		r := h.recs[i]
		comp := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" {
				comp = a.Value.String()
			}
			return true
		})
		if r.Level != w.level || r.Message != w.msg || comp != "nats" {
			t.Errorf("record %d: %s %q component=%q, want %s %q component=nats", i, r.Level, r.Message, comp, w.level, w.msg)
		}
	}
}
