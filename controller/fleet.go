package controller

import (
	"context"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
)

// The fleet (package fleet, controller/fleet) answers the agents'
// registrations and heartbeats, keeps their liveness and the registry of
// agents that mirrors ax_agents, and makes the changes of their records
// (enrollment, revocation, labels). New builds it, Start attaches and
// starts it, and what it asks of the rest of the controller is answered
// by fleetHostOf (parts.go). The rest of the controller reads its registry
// (core.agents) to place jobs, and never writes it. This file holds the
// API's agent requests, which enter it.

// AuthDir is the directory under DataDir that holds the controller's NATS
// seed and the enrolled-agent registry (nats.auth: nkeys), mode 0700.
const AuthDir = fleet.AuthDir

// EnrollAgent issues agent id its NATS identity (an NKey user in an
// account of its own that reaches only the agent's own subjects, see
// auth.AgentImports) and applies it to the running server. The returned seed exists nowhere else: the controller
// keeps only the public key. Enrolling an enrolled id fails with ErrExists
// unless req.Rotate is set, which replaces the key and closes the
// connection of the old one. Enrolling a revoked agent again clears the
// revoked mark of its ax_agents record, so that it can register.
// req.Labels become the agent's labels (kept by the controller; the
// agent's registration cannot change them, see controller/fleet); a
// request without labels keeps the labels the controller has.
func (c *Controller) EnrollAgent(_ context.Context, id string, req auth.EnrollRequest) (auth.Enrollment, error) {
	if err := c.ready(); err != nil {
		return auth.Enrollment{}, err
	}
	en, err := c.fleet.EnrollAgent(id, req)
	return en, fleetErr(err)
}

// RevokeAgent removes agent id's NATS identity: its live connection is
// closed and it can no longer connect. Its ax_agents record is marked
// revoked (registrations and heartbeats refused, group jobs moved to other
// members, not counted in ax_agents_known, its ax_agent_* gauges deleted).
// It returns what was revoked.
func (c *Controller) RevokeAgent(_ context.Context, id string) (auth.Agent, error) {
	if err := c.ready(); err != nil {
		return auth.Agent{}, err
	}
	a, err := c.fleet.RevokeAgent(id)
	return a, fleetErr(err)
}

// LabelAgent changes agent id's labels as ch says and places it again at
// once: group jobs of mode all gain or lose it, PENDING runs waiting for a
// member of its new groups are sent to it, and a mode-any job whose group
// it left is unassigned from it, its lease moving to a member. The agent
// must be known (enrolled or registered) and not revoked. The change is
// applied to the agent's record in ax_agents with compare-and-set, so that
// a write of another replica in between (a registration, a heartbeat,
// another label change) is kept. It works on the controller's context: a
// cancelled request must not stop the placement half-way.
func (c *Controller) LabelAgent(_ context.Context, id string, ch protocol.LabelChange) (protocol.AgentInfo, error) {
	if err := c.ready(); err != nil {
		return protocol.AgentInfo{}, err
	}
	if err := protocol.ValidateName("id", id); err != nil {
		return protocol.AgentInfo{}, fieldError(err)
	}
	if err := ch.Validate(); err != nil {
		return protocol.AgentInfo{}, fieldError(err)
	}
	info, err := c.fleet.LabelAgent(id, ch)
	return info, fleetErr(err)
}
