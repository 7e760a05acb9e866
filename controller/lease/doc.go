// Package lease is the vocabulary of KV ax_leases, each controller
// replica's view of it, the replica's shard ownership and its group-job
// leases: the keys (a replica's presence, a shard's lease, a group job's
// lease), their values (Replica, Shard, Group); View, the bucket mirrored
// in memory by one watcher, so that every replica sees every renewal;
// Ownership, which holds this replica's shard leases and decides which
// shards it works; and GroupLeases, which leases the group jobs (mode any)
// of those shards to agents, with epochs, and keeps the epoch history in
// KV ax_epochs.
//
// The bucket's TTL removes a key without an event, so whether a lease
// has lapsed is decided here from when the replica last saw it (Seen,
// on its own monotonic clock) plus the lease TTL, and a takeover is a
// compare-and-set on the revision last seen. The view holds no policy:
// its writers (Ownership for replica.<node> and shard.<n>, GroupLeases
// for job.<id>) record their own writes in it at once (PutShard,
// PutJob). All of View's methods are safe for concurrent
// use.
//
// # Shard ownership
//
// Ownership owns this replica's presence key, the shard leases it holds
// and the report workers of those shards (started by its host, stopped by
// it), and sets ax_shards_owned and ax_lease_takeovers_total{kind=shard}.
// The live replicas, sorted by node name, split the shards round robin; a
// replica works a shard only while it holds shard.<n>. Ownership acquires
// a free or lapsed lease (Create, or a compare-and-set on the revision
// last seen), takes at once those of an older process of its own node,
// renews every LeaseRenewInterval by compare-and-set, hands a shard over
// when another live replica should work it (the worker drains, the key is
// deleted), drops it at once when a renewal finds another holder or has
// failed for nearly a TTL, and abandons everything in a crash. Its
// decisions are read through Owns, OwnsJob, ShardOf and OwnedShards, and
// ShardOwners reports every shard's holder as the view has it.
//
// What it asks of the rest of the controller is OwnershipHost: start a
// newly held shard's report worker (a ShardWorker, which the ownership
// stops), reload the executions of newly worked shards, forget the retry
// timers and group-lease bookkeeping of a shard no longer worked, and, once
// a pass, manage the group leases and place the executions waiting for an
// agent. Everything else it gets at construction (OwnershipEnv: its
// config, metrics, logger, clocks, the goroutine runner, the view) and at
// Start (the ax_leases bucket). WriteTimeout and IsCASMiss are the bound
// and the lost-compare-and-set test that the group-lease writes share
// with it.
//
// Concurrency: Start runs the first pass on the caller's goroutine (a lone
// replica holds every shard when it returns), then one goroutine, the
// ownership loop (started with GoRun), runs every later pass and every
// release and alone touches the held leases; it calls the host on itself,
// except ReloadExecutions after the first pass, which runs on a goroutine
// of its own so that a long reload never holds up the renewals. A pass
// writes its renewals in parallel and a hand-over drains the workers in
// parallel, both awaited before the loop goes on. Owns, OwnsJob, ShardOf,
// OwnedShards and ShardOwners are safe from any goroutine. HandOver (a
// clean stop) asks the loop to release everything and waits for it (at
// most 15s); the
// end of GoRun's context makes the loop abandon its shards instead (a
// crash). Start and HandOver are each called once.
//
// # Group leases
//
// GroupLeases (grouplease.go, grouprenew.go, epochs.go) owns the writes of
// job.<id> in ax_leases and of ax_epochs, the epoch history's view, and the
// bookkeeping of the assignments it sent, and sets ax_lease_grants_total,
// ax_lease_expiries_total, ax_lease_takeovers_total{kind=group} and
// ax_lease_failover_seconds. Once a pass of the ownership loop (Manage) it
// grants the lease of each group job of a worked shard that has none, or
// whose lease lapsed (not renewed for LeaseTTL) or was handed back, to a
// live member of the job's group (fleet.GroupMembers, fleet.Rendezvous),
// with an epoch above every earlier grant, recorded in the job's epoch
// history first (RecordGrant); it sends the holder the assignment again
// when the one it last sent differs (holder, epoch or job generation),
// tells a holder that left the group to stop, and deletes the lease and
// history of a job no longer leased. A grant after an earlier one tells
// the previous holder to stop (when it is another agent) and is a Lost
// lease for the host to settle. On the heartbeat path it renews the leases an agent
// claims (RenewLeases, a compare-and-set each, at most 32 in flight) and
// marks those of a stopping agent released (ReleaseLeases). It answers who
// was granted an epoch (EpochHolder, for report authorization), who holds
// a lease now (CurrentHolder, for retries) and whether an agent is a
// member of a job's group (IsMember).
//
// What it asks of the rest of the controller is GroupLeaseHost: publish a
// command to an agent, read a job from ax_jobs (an error matching
// ErrJobNotFound when there is none), and settle the executions still
// open under an earlier epoch of leases granted again (SettleEpochs).
// Everything else it gets at construction (GroupLeaseEnv: its config,
// metrics, logger, clocks, the goroutine runner, the lease view, the job
// cache, the agents' registry and the Ownership that says which shards
// are worked) and at start (Attach: the controller's context, the
// JetStream connection, the buckets and ax_leases as the heartbeat path
// writes it; FollowEpochs then loads ax_epochs and follows it).
//
// Concurrency: Manage and ForgetShard run on the ownership loop
// (OwnershipHost.ManageGroupLeases and ForgetShard), which alone touches
// the bookkeeping of what was sent; SettleEpochs is called on a goroutine
// of its own (GoRun), never on the loop. RenewLeases and ReleaseLeases
// (heartbeat workers), EpochHolder and IsMember (report lanes) and
// CurrentHolder (retry loop) are safe for concurrent use: they read and
// write only KV and the views, each of which has its own lock. Attach is
// called once, before FollowEpochs; every method that reaches NATS (all
// but IsMember, CurrentHolder and ForgetShard) needs it.
//
// # Errors
//
// ErrJobNotFound and ErrConflict (errors.go) are matched with errors.Is:
// the first is how the host says a job does not exist, the second ends
// RecordGrant after too many lost compare-and-sets in a row.
package lease
