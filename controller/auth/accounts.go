package auth

import (
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// AccountAX is the NATS account of the controller and of every stream,
// bucket and consumer of ax. Agents are not in it.
const AccountAX = "AX"

// AgentAccount returns the NATS account of agent id. Every agent has an
// account of its own that holds only the agent.
func AgentAccount(id string) string { return "AGENT_" + id }

// Export is a service export of the ax account.
type Export struct {
	// Subject is the exported subject (with wildcards).
	Subject string
	// Stream marks an export whose requests get several responses
	// (response_type: stream): pulled messages and pull statuses.
	Stream bool
	// ResponseThreshold, when > 0, is how long the server keeps the route
	// of a request's reply back to the requesting account
	// (response_threshold; nats-server's default is 2 minutes).
	ResponseThreshold time.Duration
}

// Import is a service import of an agent's account: what the agent
// publishes to in its own account (Local) and the subject of the ax account
// it reaches (Remote). Wildcards map by position.
type Import struct {
	Local  string
	Remote string
}

// ServiceReplyPrefix starts the reply subject nats-server gives a request
// that crossed a service import. The reply leads back to the requester's
// own reply subject in the requester's own account, and no client may
// publish with such a reply itself (nats-server refuses it).
const ServiceReplyPrefix = "_R_."

// ReportResponseThreshold is how long nats-server keeps the route of a
// report's PubAck back to the agent's account. Every report crosses a
// service import, and the server holds a route for each until the
// PubAck passes or the threshold ends; a report the stream drops unanswered
// (its ingest queue full) keeps its route for the whole threshold. An
// enrolled agent's key publishing reports without pause (50,000 a second
// from one connection) grew the controller process by 1.2 GB in 150 s with
// the default of 2 minutes. ax-agent waits 5 s for a PubAck before it
// publishes the report again, so a route kept longer serves nobody.
const ReportResponseThreshold = 5 * time.Second

// AXExports are the service exports of the ax account, everything any agent
// account can import: registration and heartbeat (answered by the
// controller), reports (stored in AX_RPT with a PubAck), pulls of AX_CMD
// consumers (answered by JetStream), and the consumer gateway (answered by
// the controller, see Gateway).
func AXExports() []Export {
	return []Export{
		{Subject: protocol.SubjectRegisterAll},
		{Subject: protocol.SubjectHeartbeatAll},
		{Subject: "ax.rpt.*.*", ResponseThreshold: ReportResponseThreshold},
		{Subject: pullSubject("*"), Stream: true},
		{Subject: GatewaySubjectAll},
	}
}

// AgentImports are the service imports of agent id's account: all that the
// agent can reach outside its own account, each scoped to its own id except
// the pull, which names a consumer (see Gateway for why that is enough).
//
//	ax.reg.X, ax.hb.X                            the controller's responders
//	ax.rpt.*.X                                   AX_RPT (PubAck)
//	$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*           pulls (JetStream)
//	$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.X →  ax.jsapi.X.create.*  (Gateway)
//	$JS.API.CONSUMER.DELETE.AX_CMD.*          →  ax.jsapi.X.delete.*  (Gateway)
//	$JS.API.INFO                              →  ax.jsapi.X.info      (Gateway)
//
// The last one also keeps nats-server from giving the agent's account a
// JetStream API of its own: it does not when the account imports
// $JS.API.INFO, and that API would answer the create and delete requests
// too ("JetStream not enabled for account"), racing the gateway.
func AgentImports(id string) []Import {
	same := func(s string) Import { return Import{Local: s, Remote: s} }
	return []Import{
		same(protocol.RegisterSubject(id)),
		same(protocol.HeartbeatSubject(id)),
		same("ax.rpt.*." + id),
		same(pullSubject("*")),
		{Local: "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".*." + protocol.CommandSubject(id), Remote: GatewaySubject(id, OpCreate) + ".*"},
		{Local: "$JS.API.CONSUMER.DELETE." + protocol.StreamCommands + ".*", Remote: GatewaySubject(id, OpDelete) + ".*"},
		{Local: "$JS.API.INFO", Remote: GatewaySubject(id, OpInfo)},
	}
}

func pullSubject(consumer string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamCommands + "." + consumer
}

// AXAccountConfig renders the ax account entry of a nats-server accounts
// block: JetStream, the users (controllerUsers, e.g. "{ nkey: U… }") and
// the exports.
func AXAccountConfig(controllerUsers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s: {\n    jetstream: enabled\n    users: [\n", AccountAX)
	for _, u := range controllerUsers {
		fmt.Fprintf(&b, "      %s\n", u)
	}
	b.WriteString("    ]\n    exports: [\n")
	for _, e := range AXExports() {
		var attrs string
		if e.Stream {
			attrs += ", response_type: stream"
		}
		if e.ResponseThreshold > 0 {
			attrs += fmt.Sprintf(", response_threshold: %q", e.ResponseThreshold)
		}
		fmt.Fprintf(&b, "      { service: %q%s }\n", e.Subject, attrs)
	}
	b.WriteString("    ]\n  }\n")
	return b.String()
}

// Limits of an agent's account, so that one agent's key cannot exhaust
// the server: ax-agent holds one connection (a few more while a cut link
// is noticed), a handful of subscriptions (its request inbox, its command
// consumer's) and sends messages of at most protocol.MaxMessageSize (the
// headers of a report on top).
const (
	AgentMaxConnections   = 8
	AgentMaxSubscriptions = 1000
	AgentMaxPayload       = 2 * protocol.MaxMessageSize
)

// AgentAccountConfig renders the account entry of agent id with its NKey
// user publicKey: no JetStream, no permissions needed (the account holds
// nothing but the agent), and AgentImports.
func AgentAccountConfig(id, publicKey string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  # ax agent %s\n  %q: {\n    users: [ { nkey: %s } ]\n", id, AgentAccount(id), publicKey)
	fmt.Fprintf(&b, "    limits: { max_connections: %d, max_subscriptions: %d, max_payload: %d }\n", AgentMaxConnections, AgentMaxSubscriptions, AgentMaxPayload)
	b.WriteString("    imports: [\n")
	for _, im := range AgentImports(id) {
		if im.Local == im.Remote {
			fmt.Fprintf(&b, "      { service: { account: %s, subject: %q } }\n", AccountAX, im.Remote)
		} else {
			fmt.Fprintf(&b, "      { service: { account: %s, subject: %q }, to: %q }\n", AccountAX, im.Remote, im.Local)
		}
	}
	b.WriteString("    ]\n  }\n")
	return b.String()
}

// AccountsConfig renders the accounts block of the embedded server: the ax
// account with the controller's NKey user and one account per agent.
func AccountsConfig(controllerKey string, agents []Agent) string {
	var b strings.Builder
	b.WriteString("accounts: {\n")
	b.WriteString(AXAccountConfig("{ nkey: " + controllerKey + " }"))
	for _, a := range agents {
		b.WriteString(AgentAccountConfig(a.ID, a.PublicKey))
	}
	b.WriteString("}\n")
	return b.String()
}

// ReplyAllowed reports whether a request of agent id may be answered on
// reply: the agent's own inbox (protocol.InboxPrefix), or the reply
// nats-server made for a request that came through the agent's service
// import, which leads back into the agent's own account. Anything else (no
// reply, a stream or KV subject, another agent's subject, the JetStream
// API) is not answered.
func ReplyAllowed(id, reply string) bool {
	return strings.HasPrefix(reply, protocol.InboxPrefix(id)+".") ||
		(strings.HasPrefix(reply, ServiceReplyPrefix) && len(reply) > len(ServiceReplyPrefix))
}
