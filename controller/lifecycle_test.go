package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
)

// TestCloseDuringStartCancelsAndWaits: Close called while Start is still
// running cancels Start and returns only after it, with the controller
// closed. Before, Close tore the parts down under the running Start,
// which then went on and marked the controller ready after Close.
func TestCloseDuringStartCancelsAndWaits(t *testing.T) {
	srv := natstest.Start(t)
	c, err := New(replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	entered := make(chan struct{})
	var once sync.Once
	// The start's reload waits for the start to be cancelled.
	c.hooks.beforeReload = func(ctx context.Context) {
		once.Do(func() {
			close(entered)
			<-ctx.Done()
		})
	}
	started := make(chan error, 1)
	go func() { started <- c.Start(tctx(t)) }()
	<-entered

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-started:
	default:
		t.Fatal("Close returned while Start was still running")
	}
	if err := c.Ready(tctx(t)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready after Close during Start = %v, want ErrNotReady", err)
	}
	if err := c.Start(tctx(t)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Start after Close = %v, want ErrNotReady", err)
	}
}
