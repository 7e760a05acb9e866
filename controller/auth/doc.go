// Package auth gives every ax agent its own NATS identity with the least
// privilege it needs, and the controller its own (DESIGN §7).
//
// # Embedded server (nats.auth: nkeys)
//
// With nats.auth: nkeys the controller's embedded nats-server has one NKey
// user per identity, in server.Options.Nkeys:
//
//   - the controller: a key made at first start and kept in
//     <data_dir>/auth/controller.nk (mode 0600; the directory is 0700),
//     without restrictions;
//   - every enrolled agent: a key made by `ax-controller agent enroll <id>`
//     (POST /v1/agents/{id}:enroll). The controller stores only the public
//     key, in <data_dir>/auth/agents.json (0600); the seed is returned once
//     and written by the CLI to a 0600 file that the agent reads as
//     nats.creds (nats.go NkeyOptionFromSeed).
//
// Enroll, rotate (--rotate) and revoke (POST /v1/agents/{id}:revoke) change
// the users with server.ReloadOptions, without a restart: the server closes
// the live connection of a removed or replaced key and refuses it from then
// on (nats.go gives up after the same authorization error twice in a row).
// The users are re-applied from agents.json at every start. Clients without
// an enrolled key, including anonymous ones, are refused. Because every
// connection is authenticated, the embedded server may then listen beyond
// loopback (nats.host); with nats.auth: none that is refused.
//
// # Permissions of agent X (AgentGrants)
//
//	publish   ax.reg.X                                  registration request
//	          ax.hb.X                                   heartbeat request
//	          ax.rpt.*.X                                reports, any shard
//	          $JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.X create a consumer filtered to ax.cmd.X
//	          $JS.API.CONSUMER.MSG.NEXT.AX_CMD.*        pull from it
//	          $JS.API.CONSUMER.DELETE.AX_CMD.*          delete it when the ordered consumer resets
//	subscribe _INBOX_ax.X.>                             its own inbox (protocol.InboxPrefix)
//
// Everything else is denied: _INBOX.>, other agents' subjects, ax.cmd.* as
// a core subscription, ax.evt.>, $KV.> and every KV_* or stream API, the
// legacy and unfiltered consumer-create subjects, consumer listing and info,
// $JS.API.INFO and $JS.EVENT.>. No response permission is needed: the agent
// serves no requests. This is what nats.go v1.55 uses for the agent's work,
// found by reading jetstream/ordered.go and confirmed by the tests of this
// package: OrderedConsumer calls only CONSUMER.CREATE (with the filter in
// the subject when there is exactly one filter), MSG.NEXT and, on reset,
// CONSUMER.DELETE; it is AckNone and pull-based, so no $JS.ACK or $JS.FC;
// PubAcks of reports and request replies arrive on the custom inbox.
//
// The filtered-create subject is safe to grant: nats-server refuses a
// request whose body filter differs from the filter in the subject, and one
// with several filters (tested). MSG.NEXT and DELETE name a consumer, not a
// filter, so they cannot be limited to X's consumer; an agent that knew the
// name of another agent's ephemeral consumer could pull its commands or
// delete it. The names are random (nuid, 22 characters) and nothing an
// agent may do reveals them (no consumer list or info, no advisories, no
// other inbox). An agent can also create many consumers on its own subject;
// bound that with JetStream account limits on an external cluster.
//
// NATS sees subjects, not payloads: the controller must still check that a
// report's agent is the agent of its subject and of the execution.
//
// # External cluster (nats.url)
//
// The controller does not manage users of an external server. Give it a
// user of the account that holds the AX_* streams and ax_* buckets, with
// full permissions in that account (or at least ax.>, $JS.API.>, $KV.>,
// $JS.ACK.>, _INBOX.>), via nats.creds_file. Give every agent its own user
// in the same account with exactly the grants above.
//
// Server configuration (NKey users; ServerConfigUser renders an agent's
// entry, and its test feeds that text to nats-server's config parser):
//
//	jetstream: enabled
//	accounts: {
//	  AX: {
//	    jetstream: enabled
//	    users: [
//	      { nkey: U…controller… }
//	      # ax agent edge-a
//	      {
//	        nkey: U…edge-a…
//	        permissions: {
//	          publish: { allow: ["ax.reg.edge-a", "ax.hb.edge-a", "ax.rpt.*.edge-a", "$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.edge-a", "$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*", "$JS.API.CONSUMER.DELETE.AX_CMD.*"] }
//	          subscribe: { allow: ["_INBOX_ax.edge-a.>"] }
//	        }
//	      }
//	    ]
//	  }
//	}
//
// Make the key pair with `nk -gen user -pubout` (or `nsc`), put the seed in
// a 0600 file on the device and point nats.creds at it. Revoking is
// removing the entry and reloading the server (`nats-server --signal
// reload`), which closes the agent's connection.
//
// Decentralized JWT (operator mode) expresses the same grants on a user
// JWT; this package does not issue JWTs:
//
//	nsc add account AX
//	nsc edit account AX …                               # enable JetStream: its --js-* limit flags
//	nsc add user --account AX ax-controller            # unrestricted in AX
//	nsc add user --account AX edge-a \
//	  --allow-pub 'ax.reg.edge-a,ax.hb.edge-a,ax.rpt.*.edge-a' \
//	  --allow-pub '$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.edge-a' \
//	  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*,$JS.API.CONSUMER.DELETE.AX_CMD.*' \
//	  --allow-sub '_INBOX_ax.edge-a.>'
//	nsc generate creds --account AX --name edge-a > edge-a.creds   # the agent's nats.creds
//	nsc push                                            # with a resolver
//
// Revoke with `nsc revocations add-user --account AX --name edge-a` and
// push the account. (The nsc lines were checked against the nsc reference
// for add user --allow-pub/--allow-sub, not run: no nsc here.) The agent's nats.creds accepts such a .creds file (user
// JWT and seed) as well as a bare seed file from `agent enroll`.
//
// TLS is configured by nats.tls of the controller and of the agent (see
// controller.TLSConfig and agent.TLSConfig); it is orthogonal to these
// identities: a client certificate does not replace the NKey user.
package auth
