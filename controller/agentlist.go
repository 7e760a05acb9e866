package controller

import (
	"context"
	"slices"
	"strings"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// AgentFilter selects agents in ListAgentPage; zero fields do not filter.
type AgentFilter = apiv1.AgentFilter

// AgentCounts counts the agents matching a filter (all pages), by state.
type AgentCounts = apiv1.AgentCounts

// AgentPage is one page of the agents list with the counts of all that match.
type AgentPage = apiv1.AgentPage

// ListAgentPage returns one page of the agents matching f, ordered by id,
// as ListAgents shows them, with the counts of all matching agents. Only
// the agents of the page are copied.
func (c *Controller) ListAgentPage(ctx context.Context, f AgentFilter) (AgentPage, error) {
	if err := c.ready(); err != nil {
		return AgentPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return AgentPage{}, err
	}
	limit, err := pageSize(f.Limit)
	if err != nil {
		return AgentPage{}, err
	}
	var sel protocol.Selector
	if f.Label != "" {
		if sel, err = protocol.ParseSelector("label", f.Label); err != nil {
			return AgentPage{}, fieldError(err)
		}
	}
	page := c.fleet.ListAgentPage(f, limit, sel)
	for i := range page.Agents {
		c.agentsvc.listed(&page.Agents[i])
	}
	page.Counts.NoCommands = c.consumers.count()
	return page, nil
}

// listed completes agent a, with Online computed, as ListAgents shows
// it: NoCommandConsumer, and Leases the group leases it holds in ax_leases
// (not its own claims).
func (c *agentService) listed(a *protocol.AgentInfo) {
	a.NoCommandConsumer = a.Online && c.consumers.notReady(a.Agent)
	held := c.leases.HeldBy(a.Agent, c.mono(), c.cfg.LeaseTTL)
	a.Leases = nil
	for job, epoch := range held {
		a.Leases = append(a.Leases, protocol.HeldLease{JobID: job, Epoch: epoch})
	}
	slices.SortFunc(a.Leases, func(x, y protocol.HeldLease) int { return strings.Compare(x.JobID, y.JobID) })
}

// ListAgents returns every known agent, sorted by id, with Online computed
// now from its last heartbeat and Leases the group leases it holds.
func (c *Controller) ListAgents(ctx context.Context) ([]protocol.AgentInfo, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := c.fleet.ListAgents()
	for i := range out {
		c.agentsvc.listed(&out[i])
	}
	return out, nil
}
