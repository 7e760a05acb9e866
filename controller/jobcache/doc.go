// Package jobcache is the controller's in-memory mirror of the live jobs
// in KV ax_jobs, one per replica: loaded at start (decoded on every core),
// kept current by a watcher and by the replica's own writes (Put at the
// revision the write returned; the watcher's copy is then not decoded a
// second time). Entries carry their KV revision, so an older one never
// replaces a newer one, and a deleted job stays a tombstone for
// TombstoneKeep so that a late watcher update cannot revive it (a periodic
// job's tombstone keeps its spec for DeletedFireKeep, for the reports of
// fires made before the delete reached its agent).
//
// A periodic job is held decoded. A one-shot job is held in a compact
// form (compact.go): one immutable string of bytes with its own values
// as they are, the values many jobs repeat (handler, agent, group, delay,
// the retry and misfire policies) as indices into bounded intern tables,
// the enums packed in a byte, the numbers as varints; Get rebuilds the
// protocol.Job, and Brief answers the hot paths' questions (is it live,
// periodic, paused, of which generation, created when) without that. An
// entry so held takes under half the memory of one holding the decoded
// job (BenchmarkJobCacheMemory: 289 against 609 bytes a job, the map
// entry, id and id index included); 300,000 delayed one-shots are the
// case it is for. A job the compact form could not rebuild exactly is
// held decoded.
//
// The entries' ids and the compact forms live in a slab (slab.go): chunks
// of 256 KiB that the cache fills and compacts when half of what they
// hold is waste, instead of one small heap object per string. A burst of
// creates otherwise scattered 300,000 long-lived strings among the
// burst's short-lived objects, and each kept a span of the Go heap in use
// after the rest of it was freed: the process that made the creates held
// about 50 MiB more once the burst was over (BenchmarkJobCacheSpans: 362
// against 283 bytes of in-use spans a job).
//
// The watcher can be behind: with several replicas, a job another
// replica wrote reaches this one's cache seconds later when its link was
// cut or it was frozen. Known(id, 0) tells a job the cache has not seen at
// all from one it saw deleted (a tombstone); the controller reads ax_jobs
// for the first before it decides anything from the job's absence
// (controller/knownjob.go).
//
// It keeps the indexes the controller's hot paths read: the ids in order
// (a B-tree, for the pages of GET /v1/jobs: a page of 50 of 300,000 jobs
// reads 50 ids), the periodic jobs pinned to each agent and the periodic
// group jobs of mode all (a registration looks at those only), and the
// group jobs of mode any (the lease loop's). All methods are safe for
// concurrent use; Page and LiveWhere run their predicate under the read
// lock.
package jobcache
