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
	page := c.fleet.listAgentPage(f, limit, sel)
	for i := range page.Agents {
		c.agentsvc.listed(&page.Agents[i])
	}
	page.Counts.NoCommands = c.consumers.count()
	return page, nil
}

// listAgentPage is ListAgentPage of the registry, f's label selector
// parsed (sel) and its limit checked: the agents with Online computed now,
// without their leases and command consumers.
func (fl *fleet) listAgentPage(f AgentFilter, limit int, sel protocol.Selector) AgentPage {
	now := fl.now()
	var page AgentPage
	ids := pageIDs{limit: limit}
	r := fl.agents
	r.mu.RLock()
	for id, e := range r.agents {
		a := &e.info
		if f.Label != "" && !sel.Matches(a.Labels) || f.Version != "" && a.Version != f.Version {
			continue
		}
		on := isOnline(*a, now, fl.cfg.AgentOfflineAfter)
		if f.Online != nil && on != *f.Online {
			continue
		}
		page.Counts.Total++
		switch {
		case a.Revoked:
			page.Counts.Revoked++
		case on:
			page.Counts.Online++
		default:
			page.Counts.Offline++
		}
		if id > f.After {
			ids.offer(id)
		}
	}
	r.mu.RUnlock()
	sorted := ids.sorted()
	if ids.seen > limit {
		page.Next = sorted[limit-1]
	}
	page.Agents = make([]protocol.AgentInfo, 0, len(sorted))
	for _, id := range sorted {
		a, ok := r.get(id)
		if !ok {
			continue
		}
		a.Online = isOnline(a, now, fl.cfg.AgentOfflineAfter)
		page.Agents = append(page.Agents, a)
	}
	return page
}

// pageIDs keeps the limit smallest ids offered (a max-heap on id): a page
// of 100 of 10,000 agents no longer collects and sorts all their ids (half
// of a page's time), most ids are turned away by one comparison.
type pageIDs struct {
	ids   []string // heap: ids[0] is the largest kept
	limit int
	seen  int // ids offered
}

// offer considers id for the page.
func (p *pageIDs) offer(id string) {
	p.seen++
	h := p.ids
	switch {
	case len(h) < p.limit:
		h = append(h, id)
		for i := len(h) - 1; i > 0; { // up
			parent := (i - 1) / 2
			if h[parent] >= h[i] {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		p.ids = h
	case id < h[0]:
		h[0] = id
		for i := 0; ; { // down
			big := i
			for _, k := range []int{2*i + 1, 2*i + 2} {
				if k < len(h) && h[k] > h[big] {
					big = k
				}
			}
			if big == i {
				break
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
}

// sorted returns the ids kept, in order.
func (p *pageIDs) sorted() []string {
	slices.Sort(p.ids)
	return p.ids
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
	out := c.fleet.listAgents()
	for i := range out {
		c.agentsvc.listed(&out[i])
	}
	return out, nil
}

// listAgents returns every known agent, sorted by id, with Online
// computed now.
func (fl *fleet) listAgents() []protocol.AgentInfo {
	now := fl.now()
	out := fl.agents.snapshot()
	for i := range out {
		out[i].Online = isOnline(out[i], now, fl.cfg.AgentOfflineAfter)
	}
	return out
}
