package controller

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/kvfollow"
)

// followLeases loads ax_leases into the view and keeps it current.
func (c *core) followLeases(ctx context.Context) error {
	w, err := c.kv.Leases.WatchAll(c.ctx)
	if err != nil {
		return err
	}
	return kvfollow.Follow(ctx, w, func(e jetstream.KeyValueEntry) { c.leases.Apply(e, c.mono()) }, 1, c.goRun)
}
