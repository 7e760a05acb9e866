package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/controller/auth"
)

func agentPath(id string) string { return "/v1/agents/" + url.PathEscape(id) }

// EnrollAgent issues agent id its NATS identity. The returned Enrollment
// holds the agent's seed: the only copy, to be written to a file of mode
// 0600 on the agent. An enrolled id gives an *APIError matching ErrExists
// unless req.Rotate is set.
func (c *Client) EnrollAgent(ctx context.Context, id string, req auth.EnrollRequest) (auth.Enrollment, error) {
	var out auth.Enrollment
	err := c.do(ctx, http.MethodPost, agentPath(id)+":enroll", nil, req, &out)
	return out, err
}

// RevokeAgent removes agent id's NATS identity and closes its connection.
func (c *Client) RevokeAgent(ctx context.Context, id string) (auth.Agent, error) {
	var out auth.Agent
	err := c.do(ctx, http.MethodPost, agentPath(id)+":revoke", nil, nil, &out)
	return out, err
}
