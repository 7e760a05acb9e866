package fleet

import (
	"context"
	"hash/fnv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/pkg/protocol"
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
// subscription handler that feeds them. The handler drops a heartbeat
// whose reply subject is not the agent's inbox, and one its agent's
// bounds refuse (admit.go), before it takes a place in a queue.
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
					f.hbAdmitted.Release(strings.TrimPrefix(m.Subject, "ax.hb."))
					f.handleHeartbeat(m)
				}
			}
		})
	}
	return func(m *nats.Msg) {
		id := strings.TrimPrefix(m.Subject, "ax.hb.")
		if !f.replyAllowed(endpointHeartbeat, id, m) {
			return
		}
		if ok, _ := f.hbAdmitted.Admit(id, f.mono()); !ok {
			// An agent waits for the reply to its heartbeat before the
			// next, so only a flood gets here: answered at once, never
			// queued.
			f.m.agentRefused.WithLabelValues(endpointHeartbeat, refuseRepeat).Inc()
			respond(m, protocol.HeartbeatReply{V: protocol.Version, Error: "heartbeats of this agent come too fast"})
			return
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		select {
		case qs[h.Sum32()%heartbeatWorkers] <- m:
		case <-f.ctx.Done():
		}
	}
}
