package apiv1

import "github.com/axsched/ax/pkg/protocol"

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
