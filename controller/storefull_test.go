package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestEmbeddedStoreFullFails: the disk under the embedded server's store
// fills up (a real tmpfs of 64 MiB: the test needs Linux, root and mount,
// and skips without them). The controller fails (Failed closed, Err and
// Ready wrap ErrStoreFailed and ENOSPC) instead of looking ready while its
// writes time out, and it closes promptly. Once space is freed, a
// controller started on the same data dir is ready, keeps the job created
// before, and takes new ones.
func TestEmbeddedStoreFullFails(t *testing.T) {
	disk := testutil.SmallDisk(t, "64m")
	dir := filepath.Join(disk, "ctl")
	cfg := testConfig(t, dir)
	cfg.Reports.MaxBytes = 4 << 20 // AX_RPT's reservation must fit the small disk
	c := startController(t, cfg)
	ctx := tctx(t)
	spec := protocol.Job{Name: "before", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"}, Target: protocol.Target{Agent: "edge-1"}}
	before, err := c.CreateJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	// Writes go on (lease renewals, write marks); a create makes one at once.
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		spec.Name = "while-full"
		_, _ = c.CreateJob(wctx, spec)
	}()
	select {
	case <-c.Failed():
	case <-time.After(60 * time.Second):
		t.Fatal("controller not failed 60 s after its disk filled")
	}
	if err := c.Err(); !errors.Is(err, ErrStoreFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Err() = %v, want ErrStoreFailed and ENOSPC", err)
	}
	if err := c.Ready(ctx); !errors.Is(err, ErrNotReady) || !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("Ready() = %v, want ErrNotReady and ErrStoreFailed", err)
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close of a failed controller did not return within 30 s")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c2 := startController(t, cfg)
	if err := c2.Ready(ctx); err != nil {
		t.Fatalf("Ready after the restart: %v", err)
	}
	if _, err := c2.GetJob(ctx, before.ID); err != nil {
		t.Fatalf("job created before the disk filled: %v", err)
	}
	spec.Name = "after"
	if _, err := c2.CreateJob(ctx, spec); err != nil {
		t.Fatalf("create after the restart: %v", err)
	}
	select {
	case <-c2.Failed():
		t.Fatalf("restarted controller failed: %v", c2.Err())
	default:
	}
}

// TestJetStreamDisabledFails: when the embedded server disables JetStream
// (as nats-server does after a permission error or running out of space,
// and does not undo), the controller fails instead of answering while
// every store request goes unanswered.
func TestJetStreamDisabledFails(t *testing.T) {
	c := startController(t, testConfig(t, t.TempDir()))
	if err := c.srv.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("controller not failed 30 s after JetStream was disabled")
	}
	if err := c.Err(); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("Err() = %v, want ErrStoreFailed", err)
	}
	if err := c.Ready(tctx(t)); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("Ready() = %v, want ErrStoreFailed", err)
	}
}

// TestStoreFailureSeenAfterAccountReload: with nats.auth nkeys every
// enrollment reloads the embedded server's accounts; the server still
// logs through the controller afterwards, so a stream's write error still
// fails it (a reload that reconfigured the server's logger would lose it).
func TestStoreFailureSeenAfterAccountReload(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS.Auth = auth.ModeNKeys
	c := startController(t, cfg)
	newEnrolledAgent(t, c, "edge-1", nil).start()
	newEnrolledAgent(t, c, "edge-2", nil).start()
	select {
	case <-c.Failed():
		t.Fatalf("failed before any store error: %v", c.Err())
	default:
	}
	// The line nats-server logs when a stream's write fails (stream.go).
	c.srv.Errorf(natsStreamWriteError, auth.AccountAX, "KV_ax_execs", syscall.EIO)
	select {
	case <-c.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the server's write error line did not fail the controller after the account reloads")
	}
	if err := c.Err(); !errors.Is(err, ErrStoreFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Err() = %v, want ErrStoreFailed and EIO", err)
	}
}
