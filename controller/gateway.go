package controller

import (
	"time"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/fleet"
)

// Endpoint and reason of ax_agent_requests_refused_total (the fleet's
// are in package fleet).
const (
	endpointGateway = "consumer_gateway"
	// refuseConsumer: a consumer create or delete beyond the agent's own
	// pull consumer, answered with an error.
	refuseConsumer = "consumer"
)

// gatewayTimeout bounds a JetStream request forwarded by the gateway.
const gatewayTimeout = 5 * time.Second

// startGateway serves the agents' JetStream consumer requests
// (auth.ServeGateway): with nats.auth: nkeys, an agent's account reaches
// AX_CMD's consumer API only through it.
func (c *core) startGateway() error {
	sub, err := auth.ServeGateway(c.nc, fleet.ResponderQueue, gatewayTimeout, auth.GatewayHooks{
		Dropped: func(subject, reason string) {
			c.m.agentRefused.WithLabelValues(endpointGateway, reason).Inc()
			c.log.Warn("consumer gateway request dropped", "subject", subject, "reason", reason)
		},
		Refused: func(agent string, err error) {
			c.m.agentRefused.WithLabelValues(endpointGateway, refuseConsumer).Inc()
			c.log.Warn("consumer gateway request refused", "agent", agent, "err", err)
		},
		// Not logged: only a flood gets here, counted.
		Limited: func(string) { c.m.agentRefused.WithLabelValues(endpointGateway, auth.RefuseRepeat).Inc() },
		Now:     c.mono,
	})
	if err != nil {
		return err
	}
	c.subs = append(c.subs, sub)
	return nil
}
