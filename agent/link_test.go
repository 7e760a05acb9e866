package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
)

// TestLinkDropEndsRequestsInFlight: when the connection drops, a request
// waiting for its reply (a heartbeat) ends at once with context.Canceled
// instead of holding the link loop until nats.request_timeout, so that
// the agent registers again as soon as it has reconnected.
func TestLinkDropEndsRequestsInFlight(t *testing.T) {
	srv := natstest.Start(t)
	cfg := testConfig(t, "edge-l", srv.URL())
	cfg.NATS.RequestTimeout = time.Hour
	a, err := New(cfg, WithLogger(testLogger(t)))
	must(t, err)
	t.Cleanup(func() { _ = a.st.Close() })
	l := newLink(a)
	must(t, l.connect())
	t.Cleanup(func() { l.nc.Close() })
	// A responder that never answers.
	sub, err := l.nc.SubscribeSync("ax.test.silent")
	must(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	must(t, l.nc.Flush())

	done := make(chan error, 1)
	go func() {
		_, err := l.request(context.Background(), "ax.test.silent", []byte("ping"))
		done <- err
	}()
	testutil.Eventually(t, 10*time.Second, "request in flight", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.inflight) == 1
	})
	srv.Stop() // the connection drops; the disconnect handler cancels
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("request ended with %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("request still waiting 30s after the connection dropped (its timeout is 1h)")
	}
}
