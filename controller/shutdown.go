package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Close stops the consumers, responders and timers, closes the NATS
// connection and shuts the embedded server down. Safe to call twice, and
// during Start, which it cancels and waits for.
func (c *Controller) Close() error {
	c.lifeMu.Lock()
	if c.state == lifeStarting {
		// Start is cancelled and its end awaited: on error it has stopped
		// what it started; had it finished, the controller is closed below.
		cancel, done := c.startCancel, c.startDone
		c.lifeMu.Unlock()
		cancel()
		<-done
		c.lifeMu.Lock()
	}
	if c.state == lifeClosed {
		c.lifeMu.Unlock()
		return nil
	}
	wasNew := c.state == lifeNew
	c.state = lifeClosed
	c.lifeMu.Unlock()
	if wasNew {
		return nil
	}
	c.shutdown()
	c.log.Info("controller closed")
	return nil
}

func (c *core) shutdown() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
	// A failed store (storefailed.go) is left as a crash leaves it: its
	// writes would only time out, and the restart's reload repairs.
	orderly := !c.crashed.Load() && c.storeFail.failed() == nil
	if orderly {
		// Hand the shards over while the connection and the workers' context
		// are alive, so that what was pulled is applied, not redelivered.
		c.own.HandOver()
	}
	if c.cancel != nil {
		c.cancel()
	}
	if c.retries != nil {
		c.retries.stop()
	}
	c.wg.Wait()
	if orderly && c.nc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.ex.publishHeld(ctx, true) // before the marks: their ops wait for it
		cancel()
		c.finishMarks()
	}
	if c.hist != nil {
		c.hist.close()
	}
	if c.nc != nil {
		_ = c.nc.FlushTimeout(2 * time.Second)
		c.nc.Close()
	}
	if c.srv != nil {
		c.srv.Shutdown()
		c.srv.WaitForShutdown()
	}
}

// ready returns ErrNotReady unless Start has completed and Close has not run.
func (c *core) ready() error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	switch c.state {
	case lifeReady:
		return nil
	case lifeClosed:
		return fmt.Errorf("%w: closed", ErrNotReady)
	default:
		return fmt.Errorf("%w: not started", ErrNotReady)
	}
}

// Ready returns nil when the controller is started, has not failed
// (Failed), and its streams and buckets answer.
func (c *Controller) Ready(ctx context.Context) error {
	if err := c.ready(); err != nil {
		return err
	}
	if err := c.storeFail.failed(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if !c.nc.IsConnected() {
		return fmt.Errorf("%w: nats connection is %s", ErrNotReady, c.nc.Status())
	}
	for _, kv := range []jetstream.KeyValue{c.kv.Jobs, c.kv.Execs, c.kv.Idem, c.kv.Agents, c.kv.Leases, c.kv.Epochs} {
		if _, err := kv.Status(ctx); err != nil {
			return fmt.Errorf("%w: bucket %s: %w", ErrNotReady, kv.Bucket(), err)
		}
	}
	for _, s := range []string{protocol.StreamCommands, protocol.StreamReports, protocol.StreamEvents} {
		if _, err := c.js.Stream(ctx, s); err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrNotReady, s, err)
		}
	}
	return nil
}
