package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

func agentPath(id string) string { return "/v1/agents/" + url.PathEscape(id) }

// EnrollAgent issues agent id its NATS identity. The returned Enrollment
// holds the agent's seed: the only copy, to be written to a file of mode
// 0600 on the agent. An enrolled id gives an *APIError matching ErrExists
// unless req.Rotate is set.
func (c *Client) EnrollAgent(ctx context.Context, id string, req apiv1.EnrollRequest) (apiv1.Enrollment, error) {
	var out apiv1.Enrollment
	err := c.do(ctx, http.MethodPost, agentPath(id)+":enroll", nil, req, &out)
	return out, err
}

// RevokeAgent removes agent id's NATS identity and closes its connection.
func (c *Client) RevokeAgent(ctx context.Context, id string) (apiv1.EnrolledAgent, error) {
	var out apiv1.EnrolledAgent
	err := c.do(ctx, http.MethodPost, agentPath(id)+":revoke", nil, nil, &out)
	return out, err
}

// LabelAgent sets and removes labels of agent id (the controller's copy is
// the only one that counts) and returns the agent with its new labels. An
// unknown agent gives an *APIError matching ErrNotFound.
func (c *Client) LabelAgent(ctx context.Context, id string, ch protocol.LabelChange) (protocol.AgentInfo, error) {
	var out protocol.AgentInfo
	err := c.do(ctx, http.MethodPost, agentPath(id)+":label", nil, ch, &out)
	return out, err
}
