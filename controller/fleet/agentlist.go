package fleet

import (
	"slices"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// ListAgentPage returns one page of at most limit agents matching f,
// ordered by id, with Online computed now, and the counts of all that
// match. sel is f.Label parsed; the controller's ListAgentPage parses it
// and checks the limit, and adds the agents' leases and command
// consumers. Only the agents of the page are copied.
func (fl *Fleet) ListAgentPage(f apiv1.AgentFilter, limit int, sel protocol.Selector) apiv1.AgentPage {
	now := fl.now()
	var page apiv1.AgentPage
	ids := pageIDs{limit: limit}
	r := fl.agents
	r.mu.RLock()
	for id, e := range r.agents {
		a := &e.info
		if f.Label != "" && !sel.Matches(a.Labels) || f.Version != "" && a.Version != f.Version {
			continue
		}
		on := IsOnline(*a, now, fl.cfg.AgentOfflineAfter)
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
		a, ok := r.Get(id)
		if !ok {
			continue
		}
		a.Online = IsOnline(a, now, fl.cfg.AgentOfflineAfter)
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

// ListAgents returns every known agent, sorted by id, with Online
// computed now (without the leases and command consumers the
// controller's ListAgents adds).
func (fl *Fleet) ListAgents() []protocol.AgentInfo {
	now := fl.now()
	out := fl.agents.Snapshot()
	for i := range out {
		out[i].Online = IsOnline(out[i], now, fl.cfg.AgentOfflineAfter)
	}
	return out
}
