package agent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
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

// The command consumer's pulls ask for idle heartbeats at the
// connection's ping interval (within 1s..10s) in a cluster, and at
// maxCommandHeartbeat on a lone server.
func TestCommandHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		ping      time.Duration
		clustered bool
		want      time.Duration
	}{
		{2 * time.Second, false, maxCommandHeartbeat},
		{2 * time.Second, true, 2 * time.Second},
		{100 * time.Millisecond, true, time.Second},
		{time.Minute, true, maxCommandHeartbeat},
	} {
		if got := commandHeartbeat(tc.ping, tc.clustered); got != tc.want {
			t.Errorf("commandHeartbeat(%s, clustered %v) = %s, want %s", tc.ping, tc.clustered, got, tc.want)
		}
	}
}

// Against a lone server (the controller's embedded one), the agent's
// command pulls ask for an idle heartbeat every maxCommandHeartbeat, not
// every ping interval.
func TestCommandPullsOnALoneServer(t *testing.T) {
	c := startCtl(t)
	pulls, err := c.nc.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamCommands + ".>")
	must(t, err)
	must(t, c.nc.Flush())
	cfg := testConfig(t, "edge-p", c.srv.URL())
	cfg.NATS.PingInterval = 2 * time.Second
	startAgent(t, cfg)
	m, err := pulls.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no pull of the command consumer: %v", err)
	}
	var req struct {
		Heartbeat time.Duration `json:"idle_heartbeat"`
	}
	must(t, json.Unmarshal(m.Data, &req))
	if req.Heartbeat != maxCommandHeartbeat {
		t.Fatalf("pull asks for idle heartbeats every %s, want %s (%s)", req.Heartbeat, maxCommandHeartbeat, m.Data)
	}
}
