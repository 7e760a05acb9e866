// Package lease is the vocabulary of KV ax_leases and each controller
// replica's view of it: the keys (a replica's presence, a shard's lease,
// a group job's lease), their values (Replica, Shard, Group), and View,
// the bucket mirrored in memory by one watcher, so that every replica
// sees every renewal.
//
// The bucket's TTL removes a key without an event, so whether a lease
// has lapsed is decided here from when the replica last saw it (Seen,
// on its own monotonic clock) plus the lease TTL, and a takeover is a
// compare-and-set on the revision last seen. The view holds no policy:
// which shards a replica takes and which agent holds a group job are the
// controller's (its ownership and groupLeases components), which write
// the keys and record their own writes here at once (PutShard, PutJob).
// All of View's methods are safe for concurrent use.
package lease
