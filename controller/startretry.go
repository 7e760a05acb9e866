package controller

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// startRetryFor bounds how long Start retries a load step whose JetStream
// API request timed out. After a restart of the embedded server every
// agent re-creates its command consumer at once (10,000 consumer creations
// at 10k agents); the controller's own requests queue behind them and may
// time out, which made the restarted controller exit.
const startRetryFor = 2 * time.Minute

// retryStart runs load until it succeeds, retrying (with a growing pause,
// up to startRetryFor) while it fails with a request timeout. A step that
// succeeds is logged at debug with how long it took (retries included).
func (c *core) retryStart(ctx context.Context, what string, load func(context.Context) error) error {
	t0, pause := c.mono(), 250*time.Millisecond
	for {
		err := load(ctx)
		if err == nil {
			c.log.Debug("start step done", "step", what, "took", c.mono().Sub(t0))
		}
		if err == nil || ctx.Err() != nil || !isTimeout(err) || c.mono().Sub(t0) > startRetryFor {
			return err
		}
		if ferr := c.storeFail.failed(); ferr != nil {
			return ferr // the store cannot be written: retrying cannot help
		}
		c.log.Warn("start: a request timed out (JetStream API busy?); retrying", "step", what, "err", err, "pause", pause)
		t := c.clk.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-c.storeFail.ch:
			t.Stop()
			return c.storeFail.failed()
		case <-t.C():
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
