package controller

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/auth"
)

// Endpoints and reasons of ax_agent_requests_refused_total.
const (
	endpointRegister  = "register"
	endpointHeartbeat = "heartbeat"
	endpointGateway   = "consumer_gateway"
	// refuseConsumer: a consumer create or delete beyond the agent's own
	// pull consumer, answered with an error.
	refuseConsumer = "consumer"
)

// gatewayTimeout bounds a JetStream request forwarded by the gateway.
const gatewayTimeout = 5 * time.Second

// startGateway serves the agents' JetStream consumer requests
// (auth.ServeGateway): with nats.auth: nkeys, an agent's account reaches
// AX_CMD's consumer API only through it.
func (c *Controller) startGateway() error {
	sub, err := auth.ServeGateway(c.nc, responderQueue, gatewayTimeout, auth.GatewayHooks{
		Dropped: func(subject, reason string) {
			c.m.agentRefused.WithLabelValues(endpointGateway, reason).Inc()
			c.log.Warn("consumer gateway request dropped", "subject", subject, "reason", reason)
		},
		Refused: func(agent string, err error) {
			c.m.agentRefused.WithLabelValues(endpointGateway, refuseConsumer).Inc()
			c.log.Warn("consumer gateway request refused", "agent", agent, "err", err)
		},
	})
	if err != nil {
		return err
	}
	c.subs = append(c.subs, sub)
	return nil
}

// replyAllowed reports whether a registration or heartbeat on the subject
// of agent id may be answered (auth.ReplyAllowed); otherwise the request is
// dropped unprocessed, counted and logged.
func (c *Controller) replyAllowed(endpoint, id string, msg *nats.Msg) bool {
	if auth.ReplyAllowed(id, msg.Reply) {
		return true
	}
	c.m.agentRefused.WithLabelValues(endpoint, auth.DropReply).Inc()
	c.log.Warn("request dropped: its reply subject is not the agent's inbox", "subject", msg.Subject,
		"reply", fmt.Sprintf("%.64q", msg.Reply))
	return false
}
