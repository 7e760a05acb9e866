package controller

import (
	"context"
	"time"
)

// every runs step first after first, then every interval after the end of
// the previous run, until ctx ends: the loop of the controller's periodic
// upkeep (liveness, consumer checks, report stream, history sweep), on the
// controller's clock. A step's error is logged once, as what, unless ctx
// ended.
func (c *core) every(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error) {
	t := c.clk.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := step(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn(what, "err", err)
		}
		t.Reset(interval)
	}
}
