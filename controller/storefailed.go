package controller

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A write of the embedded nats-server to its files can fail: the disk
// full, an I/O error, the data dir's permissions changed. nats-server then
// marks the stream with the error, logs it once, and from then on drops
// every publish to that stream without an answer until the server is
// restarted and reopens its store (or, for a permission error, disables
// JetStream). A controller that went on would look ready while every
// write to that stream timed out; with the disk freed it would still not
// recover.
//
// So the controller fails instead. The server's log line (natslog.go),
// or JetStream found disabled (watchJetStream), closes Failed; Err says
// which stream and why (wrapping ErrStoreFailed and the server's error,
// e.g. syscall.ENOSPC); Ready answers it; a start still in progress gives
// up its retries; Close skips the writes that would only time out; and
// `ax-controller serve` stops with the error, so that its supervisor
// (systemd's Restart=always) starts it again.
//
// The restart reopens the store: while the disk is still full it fails
// again at its first write; once space is freed it starts and its reload
// finishes what was in flight (one-shot creates whose execution was not
// stored, reports the agents still hold in their outboxes). Nothing a
// client or an agent was told had been stored is lost: a publish the
// server dropped was never acknowledged.
//
// Only the embedded server is watched. An external NATS server's store
// failure shows as timeouts; its operator restarts that server.

// storeFailure is the failed state of a controller.
type storeFailure struct {
	once sync.Once
	ch   chan struct{}
	err  error // written once, before ch closes
}

func newStoreFailure() *storeFailure { return &storeFailure{ch: make(chan struct{})} }

// fail records err and closes the channel; only the first call counts,
// and it returns true for it. It does not block: the server calls it with
// its stream's lock held.
func (f *storeFailure) fail(err error) (first bool) {
	f.once.Do(func() {
		f.err = err
		close(f.ch)
		first = true
	})
	return first
}

// failed returns the recorded failure, nil when there is none.
func (f *storeFailure) failed() error {
	select {
	case <-f.ch:
	default:
		return nil
	}
	return f.err
}

// Failed is closed when the controller has failed for good: its embedded
// NATS server can no longer write its store (Err says why). The process
// should then Close it and exit, so that it is started again.
func (c *Controller) Failed() <-chan struct{} { return c.storeFail.ch }

// Err returns why the controller failed (it wraps ErrStoreFailed), nil
// while Failed is open.
func (c *Controller) Err() error { return c.storeFail.failed() }

// onStoreFailed is the embedded server logger's storeFailed.
func (c *core) onStoreFailed(err error) {
	if !c.storeFail.fail(err) {
		return
	}
	c.log.Error("the embedded NATS server can no longer write its store; the controller has failed and must be started again (free space or fix the data dir first)",
		"err", err, "data_dir", c.cfg.DataDir)
}

// jetStreamCheckEvery is how often watchJetStream looks.
const jetStreamCheckEvery = time.Second

// watchJetStream fails the controller when its embedded server has
// disabled JetStream (after a permission error or running out of space
// nats-server shuts JetStream down and does not bring it back). It runs
// from the end of Start until Close, which stops it before it shuts the
// server down.
func (c *core) watchJetStream(ctx context.Context) {
	c.every(ctx, jetStreamCheckEvery, jetStreamCheckEvery, "check JetStream", func(context.Context) error {
		if !c.srv.JetStreamEnabled() {
			c.onStoreFailed(fmt.Errorf("%w: JetStream disabled (the embedded server's log, component=nats, says why)", ErrStoreFailed))
		}
		return nil
	})
}
