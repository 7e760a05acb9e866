// Package fleet is the agents' side of ax-controller (docs/architecture.md),
// one per replica: it answers the agents' registrations and heartbeats,
// keeps their liveness, owns the registry of agents that mirrors KV
// ax_agents, and makes the changes of agent records: enrollment and
// revocation of their NATS identities, and labels.
//
// # What it owns
//
//   - Registrations and heartbeats (agents.go): two responders in one
//     queue group of the replicas (ResponderQueue), each behind a worker
//     pool: registrations in a bounded queue, answered "busy" with a
//     spread-out RetryAfter when it holds as many as the workers handle in
//     time (regpool.go); heartbeats on workers chosen by agent, so that an
//     agent's stay in order (hbpool.go). Both are bounded per agent before
//     they take a place in a queue (admit.go: a few waiting, and a rate),
//     so that one device's flood neither fills a queue the others need
//     nor keeps the workers writing its record.
//   - Liveness (agentstore.go, livedigest.go): a heartbeat whose reply
//     depends on no write is answered from memory; ax_agents is written
//     when the agent's state changes (online, first heartbeat, stopping,
//     lease claims) and otherwise at most every storedLivenessRefresh,
//     mostly by the liveness writers. The heartbeats in between reach the
//     other replicas (and a restarted one) through this replica's digests
//     in ax_liveness. The liveness
//     loop marks agents offline after Config.AgentOfflineAfter and sets
//     ax_agents_online and ax_agents_known, kept current in O(1) between
//     sweeps (agentcounts.go). A heartbeat's command cursor (the one the
//     agent's store holds) only raises the record's Cursor and is written
//     with it; Registry.StoredCursors gives the stored ones, which the
//     controller removes applied commands from AX_CMD up to, and a
//     registration below the stored cursor is a lost store (storeLost).
//   - The registry (registry.go): the agents as this replica knows them,
//     loaded from ax_agents at start (LoadAgents) and kept current by its
//     own writes and a watch of the bucket. Every write of an agent record
//     is a compare-and-set on its revision (agentwrite.go), so a replica
//     never overwrites a change it did not see.
//   - Enrollment and revocation (enroll.go): with nats.auth: nkeys, the
//     agents' NKey identities (controller/auth) in AuthDir under
//     Config.DataDir, applied to the embedded server (Auth), and the
//     revoked mark of the agent's record.
//   - Labels (labels.go): the controller's copy is authoritative (from
//     the enrollment, else the first registration, later only an
//     operator's LabelAgent); a registration claiming others is answered
//     with the controller's.
//   - The agents list (agentlist.go): ListAgents and one page of it
//     (ListAgentPage), with Online computed now.
//   - Group membership (members.go): which agents are members of a job's
//     group (GroupMembers, InGroup: registered, not revoked, labels
//     matching its selector) and which of them a job goes to
//     (Rendezvous); pure functions, the rules the controller's placement
//     and the group leases (controller/lease) share.
//
// # What it asks of its host
//
// Host is what it needs of the rest of the controller: adjust an agent's
// assignments after its record changed and send it the PENDING runs
// waiting for a member of its groups (ReconcileAgent, PlaceUnplaced); the
// last command sent to an agent and the re-send of its runs after its
// store lost its state (LastCommandSeq, ResendRuns); the renewal and
// release of the group leases an agent claims in a heartbeat
// (RenewLeases, ReleaseLeases). Everything else it is given: at
// construction (New: Env, its Config, Metrics, logger, clocks, goroutine
// and loop runners, the assign lock) and at start (Attach: the
// controller's context, NATS connection and buckets; StartResponders: the
// ax_agents the heartbeat path writes). The host reads the registry
// (Registry: Get, Snapshot, OnlineIDs) to place jobs, and never writes it.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. The read-modify-write
// of one agent's record (registration, heartbeat, label, enrollment,
// revocation) is serialized in a replica by the agent's lock (a stripe of
// agentLocks), held across the write to ax_agents. Env.Assign, the
// controller's lock of assignment decisions, is taken only after an
// agent's lock, never before it: the agent lock before the assign lock.
// Host.ReconcileAgent and Host.PlaceUnplaced are called with the assign
// lock held (and the agent's lock), Host.LastCommandSeq with the agent's
// lock alone, the other Host methods with neither. The registry has a
// lock of its own, taken last (in the registry's methods and the agents
// list) and never held across a call out of the package.
// EnrollAgent, RevokeAgent and LabelAgent work on the controller's
// context (Attach), not a request's: a cancelled request does not stop
// the placement half-way.
//
// # Errors
//
// EnrollAgent, RevokeAgent and LabelAgent return ErrNotFound, ErrExists
// or ErrConflict (errors.go) wrapped with the operation, or a
// *protocol.FieldError for labels that are not valid; the controller
// makes its own sentinels of the same names match them.
package fleet
