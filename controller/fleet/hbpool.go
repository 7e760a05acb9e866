package fleet

import (
	"context"
	"hash/fnv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Heartbeats are handled by heartbeatWorkers goroutines (mostly waiting
// for KV round trips) fed by the
// heartbeat subscription, an agent's always by the same worker (its
// heartbeats stay in order). A heartbeat that waits for a write to
// ax_agents (the agent's first, a state change, the coarse refresh) or for
// its agent's lock held by a registration no longer holds up every other
// agent's heartbeat queued behind it on the one subscription.
const (
	heartbeatWorkers = 32
	heartbeatQueue   = 1024 // per worker; a full queue makes the subscription wait
)

// startHeartbeatWorkers starts the heartbeat workers and returns the
// subscription handler that feeds them.
func (f *Fleet) startHeartbeatWorkers() nats.MsgHandler {
	qs := make([]chan *nats.Msg, heartbeatWorkers)
	for i := range qs {
		q := make(chan *nats.Msg, heartbeatQueue)
		qs[i] = q
		f.goRun(func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-q:
					f.handleHeartbeat(m)
				}
			}
		})
	}
	return func(m *nats.Msg) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(strings.TrimPrefix(m.Subject, "ax.hb.")))
		select {
		case qs[h.Sum32()%heartbeatWorkers] <- m:
		case <-f.ctx.Done():
		}
	}
}
