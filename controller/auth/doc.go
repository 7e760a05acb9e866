// Package auth gives every ax agent its own NATS identity in a NATS
// account of its own, and the controller its own identity in the ax
// account (docs/architecture.md: Security model).
//
// # Identities (nats.auth: nkeys)
//
//   - the controller: a key made at first start and kept in
//     <data_dir>/auth/controller.nk (mode 0600; the directory is 0700);
//   - every enrolled agent: a key made by `ax-controller agent enroll <id>`
//     (POST /v1/agents/{id}:enroll). The controller stores only the public
//     key, in <data_dir>/auth/agents.json (0600); the seed is returned once
//     and written by the CLI to a 0600 file that the agent reads as
//     nats.creds (nats.go NkeyOptionFromSeed).
//
// Open writes an empty agents.json at first start and refuses to go on
// when controller.nk exists but agents.json does not (ErrRegistryMissing,
// naming the file): started without it, the controller would refuse every
// enrolled agent.
//
// # Accounts
//
// The embedded server has the account AX (AccountAX): the controller's
// user, JetStream, and every stream, bucket and consumer of ax. Every
// agent X has the account AGENT_X (AgentAccount) with its one NKey user,
// no JetStream and no permissions to configure: the account holds nothing
// but the agent. AGENT_X reaches AX only through the service imports of
// AgentImports, each scoped to X:
//
//	ax.reg.X, ax.hb.X                          registration, heartbeat (the controller)
//	ax.rpt.*.X                                 reports into AX_RPT, with PubAck
//	$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*         pulls of its command consumer (JetStream)
//	$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.X  create/delete a consumer named X~… filtered
//	$JS.API.CONSUMER.DELETE.AX_CMD.*           to ax.cmd.X (the controller's Gateway)
//	$JS.API.INFO                               answered "JetStream not enabled" (Gateway)
//
// A request that crosses an import gets a fresh reply subject (_R_.…) in
// AX that leads back to the requester's reply subject in the requester's
// account. So the reply subject an agent picks (for a request, a report's
// PubAck, a pull's messages and statuses) resolves in its own account,
// where there is no JetStream API and nothing of anyone else: it cannot
// make the controller or the server write into AX. nats-server refuses a
// client's publish whose reply starts with _R_. or $JS.ACK..
//
// Why one account per agent rather than one for all agents: the imports
// are then scoped to each id by construction (no per-user permissions on
// top of shared imports), and a reply subject resolves where only the
// agent itself listens; in a shared agent account it could still reach
// other agents' inboxes.
//
// Why a gateway for consumer creation: a consumer lives in AX, and so does
// its deliver_subject; JetStream does not check that the creator may
// publish there (nats-io/nats-server#8274). See ServeGateway and
// ValidateConsumerCreate.
//
// Defence in depth: the controller's responders and the gateway answer
// only on the agent's own inbox prefix (protocol.InboxPrefix) or on an
// _R_. service-import reply (ReplyAllowed); anything else is dropped and
// counted (ax_agent_requests_refused_total).
//
// Bounds per agent: the gateway forwards at most ten of one agent's
// consumer creates and deletes at once, then one every two seconds
// (internal/admission), and an agent's consumer idles at most
// MaxConsumerIdle, so one agent's key cannot take AX_CMD's consumers
// (max_consumers, shared by the fleet) nor hold up the others' requests. An agent's account has NATS limits too
// (AgentMaxConnections, AgentMaxSubscriptions, AgentMaxPayload), written
// into its account block. The export of the report subjects keeps the
// route of a report's PubAck back to the agent's account for
// ReportResponseThreshold (5 s, the agent's own PubAck wait) instead of
// nats-server's 2 minutes, so that a key publishing reports without pause
// cannot pile up routes for reports the stream drops unanswered; what
// AX_RPT holds of one agent is bounded per subject
// (streams.Config.ReportMaxPerSubject).
//
// # Changes at runtime
//
// Enroll, rotate (--rotate) and revoke (POST /v1/agents/{id}:revoke)
// change the accounts with server.ReloadOptions (Apply), without a
// restart: the server closes the live connection of a removed or replaced
// key and refuses it from then on. nats-server v2.15 subscribes the
// service imports of an account that a reload adds only at the next
// reload, so Apply reloads twice when an agent account is new. A reload
// re-creates the service-import subscriptions of every account; a request
// in flight at that moment may go unanswered (the agent retries). The
// accounts are configured from agents.json at every start. Clients without
// an enrolled key are refused, so the embedded server may listen beyond
// loopback (nats.host); with nats.auth: none that is refused.
//
// The embedded server keeps ax's JetStream store in account $G without
// auth and in AX with nkeys; the controller renames the directory when the
// mode changes (controller.startEmbedded).
//
// # External server (nats.url)
//
// The controller does not manage an external server's accounts. Configure
// AccountsConfig's block (configs/nats-accounts.conf is a sample, tested
// against nats-server's config file parser and a server started from it):
// the AX account with JetStream, the controller's user and the exports of
// AXExports, and for every agent the entry of AgentAccountConfig. Give the
// controller its seed or .creds file as nats.creds_file and each agent its
// own as nats.creds. After adding or removing an agent account reload the
// server (`nats-server --signal reload`); after adding one, reload a second
// time (see above). Exports are public: if other accounts live on the same
// server, restrict them with `accounts: [...]` to the agent accounts.
//
// In operator (JWT) mode the same accounts are made with nsc. The commands
// below were run as written (nsc v2.10.2 after `nsc add operator --sys`,
// `nsc generate config --mem-resolver` included in a nats-server v2.15.2
// config with JetStream): the controller with controller.creds as
// nats.creds_file and an agent with edge-a.creds registered and ran a
// pinned exec job to SUCCESS.
//
//	nsc add account AX
//	nsc edit account AX --js-enable 1            # JetStream (older nsc: --js-mem-storage/--js-disk-storage)
//	nsc add export --account AX --service --subject 'ax.reg.*'
//	nsc add export --account AX --service --subject 'ax.hb.*'
//	nsc add export --account AX --service --subject 'ax.rpt.*.*'
//	nsc add export --account AX --service --subject '$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*' --response-type Stream
//	nsc add export --account AX --service --subject 'ax.jsapi.>'
//	nsc add user --account AX ax-controller
//	nsc generate creds --account AX --name ax-controller > controller.creds
//
//	AX=$(nsc describe account AX --field sub | tr -d '"')
//	nsc add account AGENT_edge-a
//	for s in ax.reg.edge-a ax.hb.edge-a 'ax.rpt.*.edge-a' '$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*'; do
//	  nsc add import --account AGENT_edge-a --service --src-account "$AX" --remote-subject "$s" --local-subject "$s"
//	done
//	nsc add import --account AGENT_edge-a --service --src-account "$AX" \
//	  --remote-subject 'ax.jsapi.edge-a.create.*' --local-subject '$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.edge-a'
//	nsc add import --account AGENT_edge-a --service --src-account "$AX" \
//	  --remote-subject 'ax.jsapi.edge-a.delete.*' --local-subject '$JS.API.CONSUMER.DELETE.AX_CMD.*'
//	nsc add import --account AGENT_edge-a --service --src-account "$AX" \
//	  --remote-subject 'ax.jsapi.edge-a.info' --local-subject '$JS.API.INFO'
//	nsc add user --account AGENT_edge-a edge-a
//	nsc generate creds --account AGENT_edge-a --name edge-a > edge-a.creds   # the agent's nats.creds
//	nsc push --all                                                          # with a resolver
//
// Revoke by deleting the agent's account (or `nsc revocations add-user`)
// and pushing. The agent's nats.creds accepts such a .creds file as well
// as a bare seed file from `agent enroll`.
//
// TLS is configured by nats.tls of the controller and of the agent; it is
// orthogonal to these identities: a client certificate does not replace
// the NKey user.
package auth
