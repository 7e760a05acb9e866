package agenttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/testutil"
)

// Config returns an agent config for a test: agent id, its store in dir
// (a test's temporary directory), NATS at url, quick reconnects, pings
// every 500ms, heartbeats every 200ms until the controller names its
// interval, SQLite synchronous=normal and a 2s shutdown grace.
func Config(id, url, dir string) agent.Config {
	cfg := agent.DefaultConfig()
	cfg.ID = id
	cfg.DataDir = dir
	cfg.NATS.URL = url
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.NATS.PingInterval = 500 * time.Millisecond
	cfg.NATS.Heartbeat = 200 * time.Millisecond
	cfg.Store.Synchronous = "normal"
	cfg.Shutdown.Grace = 2 * time.Second
	return cfg
}

// Running is an agent running in the background of a test.
type Running struct {
	// Agent is the running agent.
	Agent  *agent.Agent
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Start builds an agent with cfg and opts (a logger from
// testutil.Logger unless opts give one) and runs it until Stop or the end
// of the test.
func Start(tb testing.TB, cfg agent.Config, opts ...agent.Option) *Running {
	tb.Helper()
	opts = append([]agent.Option{agent.WithLogger(testutil.Logger().With("who", cfg.ID))}, opts...)
	a, err := agent.New(cfg, opts...)
	if err != nil {
		tb.Fatalf("agent.New(%s): %v", cfg.ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{Agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	tb.Cleanup(func() { r.Stop(tb) })
	return r
}

// Stop cancels the agent's Run and waits up to 30s for it to return; an
// error from Run fails the test.
func (r *Running) Stop(tb testing.TB) { tb.Helper(); r.StopWithin(tb, 30*time.Second) }

// StopWithin is Stop waiting up to d. Calling it again is harmless.
func (r *Running) StopWithin(tb testing.TB, d time.Duration) {
	tb.Helper()
	r.cancel()
	first := false
	r.once.Do(func() {
		first = true
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case r.err = <-r.done:
		case <-t.C:
			tb.Errorf("agent did not stop within %s", d)
		}
	})
	if first && r.err != nil {
		tb.Errorf("agent Run: %v", r.err)
	}
}
