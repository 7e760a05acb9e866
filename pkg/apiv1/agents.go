package apiv1

import (
	"net/url"
	"strconv"

	"github.com/axsched/ax/pkg/protocol"
)

// AgentCounts counts the agents matching a filter (all pages), by state.
type AgentCounts struct {
	Total   int `json:"total"`
	Online  int `json:"online"`
	Offline int `json:"offline"`
	Revoked int `json:"revoked"`
	// NoCommands are online agents without a command consumer.
	NoCommands int `json:"no_commands"`
}

// AgentPage is one page of GET /v1/agents.
type AgentPage struct {
	Agents []protocol.AgentInfo `json:"agents"`
	// Next is the after of the next page; empty on the last.
	Next   string      `json:"next"`
	Counts AgentCounts `json:"counts"`
}

// AgentFilter selects agents in a page of GET /v1/agents (query
// parameters label, online, version, limit, after); zero fields do not
// filter.
type AgentFilter struct {
	// Label is a label selector ("site=a,role=pump", protocol.ParseSelector).
	Label string
	// Online, when set, selects online (true) or offline (false) agents.
	Online *bool
	// Version selects agents reporting this version.
	Version string
	// Limit is the page size (the server's default when 0); After the Next
	// of the previous page.
	Limit int
	After string
}

// Values encodes f as the query of GET /v1/agents (zero fields left out).
func (f AgentFilter) Values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"label": f.Label, "version": f.Version, "after": f.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Online != nil {
		q.Set("online", strconv.FormatBool(*f.Online))
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}
