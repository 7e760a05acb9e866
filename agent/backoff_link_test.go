package agent

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// A controller that answers "busy, retry after 600ms" is not asked again
// before that (the agent's own backoff comes on top), then the agent
// registers.
func TestBusyRegistrationWaitsRetryAfter(t *testing.T) {
	const retryAfter = 600 * time.Millisecond
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL())
	must(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = streams.Ensure(ctx, js, streams.Config{})
	must(t, err)
	var mu sync.Mutex
	var at []time.Time
	_, err = nc.Subscribe(protocol.SubjectRegisterAll, func(m *nats.Msg) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		rep := protocol.RegisterReply{V: protocol.Version, ControllerTime: time.Now().UTC(), Shards: 4}
		if n <= 2 {
			rep = protocol.RegisterReply{V: protocol.Version, Error: "controller busy, retry later", RetryAfter: protocol.Duration(retryAfter)}
		}
		b, _ := protocol.Encode(rep)
		_ = m.Respond(b)
	})
	must(t, err)
	must(t, nc.Flush())
	startAgent(t, testConfig(t, "edge-busy", srv.URL())) // reconnect_wait 50ms: it used to retry every 100ms
	waitFor(t, 20*time.Second, "the third registration", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(at) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < 3; i++ {
		if d := at[i].Sub(at[i-1]); d < retryAfter {
			t.Fatalf("registration %d came %s after a busy answer with retry_after %s", i+1, d, retryAfter)
		}
	}
}

// retryLog records the retry_in of the agent's "registration failed;
// retrying" log records.
type retryLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (h *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLog) WithGroup(string) slog.Handler            { return h }
func (h *retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "registration failed; retrying" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "retry_in" {
			h.mu.Lock()
			h.waits = append(h.waits, a.Value.Duration())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *retryLog) snapshot() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.waits)
}

// While no controller answers registrations at all ("no responders": one
// is starting), the agent's backoff stays within noResponderWaits
// heartbeat intervals however often it failed, so that it registers soon
// after the controller is ready (it used to grow to 30 s).
func TestNoResponderRegistrationBackoffCapped(t *testing.T) {
	srv := natstest.Start(t)
	cfg := testConfig(t, "edge-early", srv.URL()) // heartbeat 100ms, reconnect_wait 50ms
	limit := noResponderWaits * cfg.NATS.Heartbeat
	rl := &retryLog{}
	startAgent(t, cfg, WithLogger(slog.New(rl)))
	waitFor(t, 30*time.Second, "10 registrations without a controller", func() bool { return len(rl.snapshot()) >= 10 })
	for i, d := range rl.snapshot() {
		if d > limit {
			t.Fatalf("retry %d without a controller in %s, want at most %s", i+1, d, limit)
		}
	}
}

// A busy answer is an answer: the backoff starts again after it, so that
// an agent told "busy" several times and then timing out once waits the
// first step of its backoff, not one grown by the busy answers.
func TestBusyAnswerRestartsBackoff(t *testing.T) {
	const busyN = 6
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL())
	must(t, err)
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	n := 0
	_, err = nc.Subscribe(protocol.SubjectRegisterAll, func(m *nats.Msg) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k > busyN {
			return // no answer: the agent times out
		}
		b, _ := protocol.Encode(protocol.RegisterReply{V: protocol.Version, Error: "controller busy, retry later",
			RetryAfter: protocol.Duration(20 * time.Millisecond)})
		_ = m.Respond(b)
	})
	must(t, err)
	must(t, nc.Flush())
	cfg := testConfig(t, "edge-busy-reset", srv.URL()) // reconnect_wait 50ms, request_timeout 1s
	rl := &retryLog{}
	startAgent(t, cfg, WithLogger(slog.New(rl)))
	waitFor(t, 30*time.Second, "a timeout after the busy answers", func() bool { return len(rl.snapshot()) > busyN })
	if d, limit := rl.snapshot()[busyN], 2*cfg.NATS.ReconnectWait; d > limit {
		t.Fatalf("retry after a timeout that followed %d busy answers in %s, want at most %s (the first step)", busyN, d, limit)
	}
}
