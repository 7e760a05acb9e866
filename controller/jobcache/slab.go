package jobcache

import (
	"unsafe"

	"github.com/google/btree"
)

// slab holds the cache's small long-lived strings (every entry's id, and
// a one-shot job's compact form) in chunks of slabChunk bytes instead of
// one heap object each.
//
// Why: a burst of creates allocates these strings among the burst's
// short-lived objects (the embedded server's Msg-Id entries and per-block
// state, dropped minutes later). Each string then pins the span of 8 KiB
// it was placed in, and the Go heap cannot move it: after 300,000 creates
// the cache's strings kept about 60 MB of spans in use that were mostly
// free slots (bench/JOURNAL.md, stop 51). A chunk is one large object with
// spans of its own, freed whole.
//
// A chunk's bytes never change once written (a string handed out may
// point into it, and keeps it alive); strings whose entry went (a job
// removed, a tombstone pruned, a job replaced by a newer revision) stay
// in their chunk as waste until the cache compacts: when the chunks hold
// more than twice the live bytes plus slabSlack, every live string is
// copied to a new slab (Cache.compactIfWasteful), so the waste is bounded by
// the live bytes and the copying costs O(1) per byte written.
//
// A slab is owned by its cache and changed only by a change of the
// cache (Cache.lock: wmu and the write lock held).
type slab struct {
	cur     []byte
	used    int    // bytes written to chunks since the slab began
	live    int    // bytes of the strings entries still hold
	scratch []byte // toCompact's buffer, reused
}

const (
	// slabChunk is the size of a chunk: above the Go allocator's 32 KiB
	// small-object limit, so that a chunk has spans of its own.
	slabChunk = 256 << 10
	// slabMax is the longest string held in the slab; a longer one (a
	// job with a large payload) is a heap object of its own.
	slabMax = slabChunk / 16
	// slabSlack is the waste a slab may always hold without compacting.
	slabSlack = 4 * slabChunk
)

// inSlab reports whether a string of n bytes is held in the slab.
func inSlab(n int) bool { return n > 0 && n <= slabMax }

// add returns a copy of b held in the slab (a heap string when b is
// longer than slabMax, "" when it is empty).
func (s *slab) add(b []byte) string {
	if !inSlab(len(b)) {
		return string(b)
	}
	if cap(s.cur)-len(s.cur) < len(b) {
		s.cur = make([]byte, 0, slabChunk)
	}
	off := len(s.cur)
	s.cur = append(s.cur, b...)
	s.used += len(b)
	s.live += len(b)
	return unsafe.String(&s.cur[off], len(b))
}

// addString is add of v's bytes.
func (s *slab) addString(v string) string {
	return s.add(unsafe.Slice(unsafe.StringData(v), len(v)))
}

// release records that an entry no longer holds v (from add).
func (s *slab) release(v string) {
	if inSlab(len(v)) {
		s.live -= len(v)
	}
}

// wasteful reports whether the slab should be compacted.
func (s *slab) wasteful() bool {
	return s.used > 2*s.live+slabSlack
}

// lock takes the cache for a change: wmu, then mu's write lock.
func (jc *Cache) lock() {
	jc.wmu.Lock()
	jc.mu.Lock()
}

// unlock ends a change (lock): it releases mu, compacts the slab when it
// is wasteful (compactIfWasteful), and releases wmu.
func (jc *Cache) unlock() {
	jc.mu.Unlock()
	jc.compactIfWasteful()
	jc.wmu.Unlock()
}

// compactIfWasteful copies the live strings to a new slab when the
// current one holds more than twice their bytes (plus slabSlack), and
// rebuilds the map and the ordered ids around them, so that the old
// chunks are freed. Called with wmu held and mu not: no change can come
// while it copies under the read lock, and readers wait only for the
// swap (BenchmarkJobCacheCompact: the copying of 100,000 jobs).
func (jc *Cache) compactIfWasteful() {
	jc.mu.RLock()
	if !jc.slab.wasteful() {
		jc.mu.RUnlock()
		return
	}
	ns := slab{scratch: jc.slab.scratch}
	m := make(map[string]cachedJob, len(jc.jobs))
	ids := btree.NewG(32, lessID)
	for id, cj := range jc.jobs {
		k := ns.addString(id)
		cj.one = ns.addString(cj.one)
		m[k] = cj
		if !cj.deleted {
			ids.ReplaceOrInsert(k)
		}
	}
	jc.mu.RUnlock()
	jc.mu.Lock()
	jc.jobs, jc.ids, jc.slab = m, ids, ns
	jc.mu.Unlock()
}

// lessID orders the ids of the cache's B-tree.
func lessID(a, b string) bool { return a < b }
