// Package lease is the vocabulary of KV ax_leases, each controller
// replica's view of it, and the replica's shard ownership: the keys (a
// replica's presence, a shard's lease, a group job's lease), their values
// (Replica, Shard, Group); View, the bucket mirrored in memory by one
// watcher, so that every replica sees every renewal; and Ownership, which
// holds this replica's shard leases and decides which shards it works.
//
// The bucket's TTL removes a key without an event, so whether a lease
// has lapsed is decided here from when the replica last saw it (Seen,
// on its own monotonic clock) plus the lease TTL, and a takeover is a
// compare-and-set on the revision last seen. The view holds no policy:
// its writers (Ownership for replica.<node> and shard.<n>, the
// controller's groupLeases for job.<id>) record their own writes in it at
// once (PutShard, PutJob). All of View's methods are safe for concurrent
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
// and the lost-compare-and-set test that the controller's group-lease
// writes share with it.
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
package lease
