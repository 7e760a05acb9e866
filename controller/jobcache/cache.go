package jobcache

import (
	"sort"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/axsched/ax/pkg/protocol"
)

// Cache mirrors KV ax_jobs in memory: loaded at start, kept current by
// a watcher and by the controller's own writes. Entries carry the KV
// revision; an older revision never replaces a newer one, and deletions
// stay as tombstones so that a late watcher update cannot revive a job,
// for TombstoneKeep (PruneTombstones): the cache holds live jobs only.
type Cache struct {
	// wmu is held by every change (write) and by the slab's compaction,
	// which builds the new map and ids under mu's read lock only: readers
	// wait for the swap, not for the copying.
	wmu  sync.Mutex
	mu   sync.RWMutex
	jobs map[string]cachedJob
	// groupAny indexes the live group jobs of mode any (Job.GroupAny), the
	// ones the ownership loop looks at on every pass.
	groupAny map[string]struct{}
	// groupAll indexes the live periodic group jobs of mode all, and
	// pinned the live periodic jobs pinned to each agent: the only jobs a
	// registration looks at (the placement's ReconcileAgent), so that its cost does not
	// grow with the controller's job count.
	groupAll map[string]struct{}
	pinned   map[string]map[string]struct{}
	// changed is when each live periodic job last changed (unix
	// nanoseconds): the time of its KV revision as the watcher delivered
	// it, or of this replica's own write (Put). A reload re-sends the
	// assignments of the jobs changed after the write marks (ChangedPeriodic).
	changed map[string]int64
	// ids holds the ids of the live jobs in order, for the pages of
	// ListJobs: a page of 50 of 300,000 jobs reads 50 ids (and the ones
	// its filter turns away), not every entry of the map.
	ids *btree.BTreeG[string]
	// intern shares the values many one-shot jobs repeat (compact).
	intern *interner
	// slab holds the entries' ids (the map's keys and ids's items) and
	// the one-shot jobs' compact forms (slab.go).
	slab slab
	// now dates tombstones (the controller's clock; nil: time.Now).
	now func() time.Time
	// decoded holds the *protocol.Job values Apply decodes into.
	decoded sync.Pool
}

// TombstoneKeep is how long a deleted job's tombstone stays in the cache:
// far longer than a watcher update or a write's answer is late.
const TombstoneKeep = time.Minute

// DeletedFireKeep is how long the tombstone of a deleted periodic job keeps
// its spec: a fire the agent made before it applied the unassign (in
// flight at the delete, or while its link was down) is reported up to this
// long after and still recorded (a replay of a recorded fire is refused by
// the live record or the history, so this need not match
// reports.dedup_window).
const DeletedFireKeep = 2 * time.Hour

// New returns an empty cache; now dates its tombstones (nil: time.Now).
func New(now func() time.Time) *Cache {
	return &Cache{jobs: map[string]cachedJob{}, groupAny: map[string]struct{}{},
		groupAll: map[string]struct{}{}, pinned: map[string]map[string]struct{}{}, changed: map[string]int64{},
		ids: btree.NewG(32, lessID), now: now, intern: newInterner(),
		decoded: sync.Pool{New: func() any { return new(protocol.Job) }}}
}

// reserve sizes an empty cache for n jobs.
func (jc *Cache) reserve(n int) {
	jc.lock()
	defer jc.unlock()
	if len(jc.jobs) == 0 {
		jc.jobs = make(map[string]cachedJob, n)
	}
}

// index adds (add true) or removes live job j from the indexes.
func (jc *Cache) index(j protocol.Job, add bool) {
	if !j.Periodic() {
		return
	}
	var set map[string]struct{}
	switch {
	case j.Target.Agent != "":
		set = jc.pinned[j.Target.Agent]
		if set == nil {
			if !add {
				return
			}
			set = map[string]struct{}{}
			jc.pinned[j.Target.Agent] = set
		}
	case j.GroupAny():
		set = jc.groupAny
	case j.Target.Group != "":
		set = jc.groupAll
	default:
		return
	}
	if add {
		set[j.ID] = struct{}{}
		return
	}
	delete(set, j.ID)
	if j.Target.Agent != "" && len(set) == 0 {
		delete(jc.pinned, j.Target.Agent)
	}
}

// exactNanos reports whether at (unix nanoseconds; 0 for the zero time)
// gives t back as the same instant.
func exactNanos(at int64, t time.Time) bool {
	if at == 0 {
		return t.IsZero()
	}
	return time.Unix(0, at).Equal(t)
}

// Put records job at rev unless a newer revision is known: a write of
// this replica, changed now.
func (jc *Cache) Put(job protocol.Job, rev uint64) {
	jc.put(job, rev, jc.clock())
}

// clock reads the cache's clock.
func (jc *Cache) clock() time.Time {
	if jc.now != nil {
		return jc.now()
	}
	return time.Now()
}

// put records job at rev, changed at at, unless a newer revision is known.
func (jc *Cache) put(job protocol.Job, rev uint64, at time.Time) {
	jc.lock()
	defer jc.unlock()
	cur, ok := jc.jobs[job.ID]
	if ok && cur.rev >= rev {
		return
	}
	if job.Periodic() {
		jc.changed[job.ID] = at.UnixNano()
	} else {
		delete(jc.changed, job.ID)
	}
	if ok && !cur.deleted && cur.job != nil {
		jc.index(*cur.job, false)
	}
	cj := entryOf(&job, rev, jc.intern, &jc.slab)
	if ok && !cur.deleted {
		jc.slab.release(cur.one)
		jc.jobs[job.ID] = cj
	} else {
		if ok {
			// A tombstone revived: its key (equal to job.ID) is dropped
			// with it, since a map keeps the key it has and the B-tree
			// needs the same string.
			jc.slab.release(job.ID)
			delete(jc.jobs, job.ID)
		}
		id := jc.slab.addString(job.ID)
		jc.jobs[id] = cj
		jc.ids.ReplaceOrInsert(id)
	}
	if cj.job != nil {
		jc.index(*cj.job, true)
	}
}

// Remove records the deletion of id at rev.
func (jc *Cache) Remove(id string, rev uint64) {
	jc.lock()
	defer jc.unlock()
	cur, ok := jc.jobs[id]
	if ok && cur.rev >= rev {
		return
	}
	var last *protocol.Job
	delete(jc.changed, id)
	if !ok {
		id = jc.slab.addString(id)
	}
	if ok && !cur.deleted {
		jc.ids.Delete(id)
		jc.slab.release(cur.one)
		if cur.job != nil {
			jc.index(*cur.job, false)
			if cur.job.Periodic() {
				last = cur.job // DeletedPeriodic
			}
		}
	}
	jc.jobs[id] = cachedJob{job: last, rev: rev, deleted: true, at: jc.clock().UnixNano()}
}

// DeletedPeriodic returns the spec of periodic job id and when this
// replica saw it deleted, while its tombstone is kept (DeletedFireKeep):
// the reports of fires an agent made before it learned of the deletion
// are still recorded (authorizeCreate).
func (jc *Cache) DeletedPeriodic(id string) (protocol.Job, time.Time, bool) {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cj, ok := jc.jobs[id]
	if !ok || !cj.deleted || cj.job == nil {
		return protocol.Job{}, time.Time{}, false
	}
	return *cj.job, time.Unix(0, cj.at), true
}

// PinnedTo returns the live periodic jobs pinned to agent, sorted by id.
func (jc *Cache) PinnedTo(agent string) []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return jc.sorted(jc.pinned[agent])
}

// GroupAllJobs returns the live periodic group jobs of mode all, sorted by id.
func (jc *Cache) GroupAllJobs() []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return jc.sorted(jc.groupAll)
}

// sorted returns the jobs of ids sorted by id. Called with mu held.
func (jc *Cache) sorted(ids map[string]struct{}) []protocol.Job {
	out := make([]protocol.Job, 0, len(ids))
	for id := range ids {
		out = append(out, *jc.jobs[id].job)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// PruneTombstones drops the tombstones of jobs deleted before t, and those
// of periodic jobs (which keep the job's spec) deleted before periodicT.
func (jc *Cache) PruneTombstones(t, periodicT time.Time) {
	jc.lock()
	defer jc.unlock()
	for id, cj := range jc.jobs {
		if cj.deleted && cj.at < t.UnixNano() && (cj.job == nil || cj.at < periodicT.UnixNano()) {
			delete(jc.jobs, id)
			jc.slab.release(id)
		}
	}
}

// Deleted returns the ids of the jobs the cache holds as tombstones
// (deleted, not yet pruned), in no order.
func (jc *Cache) Deleted() []string {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	var out []string
	for id, cj := range jc.jobs {
		if cj.deleted {
			out = append(out, id)
		}
	}
	return out
}

// Len returns the number of entries, tombstones included.
func (jc *Cache) Len() int {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return len(jc.jobs)
}

// GroupAnyJobs returns the live group jobs of mode any, in no order.
func (jc *Cache) GroupAnyJobs() []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	out := make([]protocol.Job, 0, len(jc.groupAny))
	for id := range jc.groupAny {
		out = append(out, *jc.jobs[id].job)
	}
	return out
}

// Get returns a live job (a one-shot job's is rebuilt from its compact
// form: Brief tells what the hot paths need without that). Its CreatedAt
// is in UTC, without a monotonic clock reading.
func (jc *Cache) Get(id string) (protocol.Job, uint64, bool) {
	jc.mu.RLock()
	cj, ok := jc.jobs[id]
	tab := jc.intern.tab
	jc.mu.RUnlock()
	if !ok || cj.deleted {
		return protocol.Job{}, 0, false
	}
	return cj.spec(id, tab), cj.rev, true
}

// Brief returns what the cache knows of live job id without decoding it.
func (jc *Cache) Brief(id string) (Brief, bool) {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cj, ok := jc.jobs[id]
	if !ok || cj.deleted {
		return Brief{}, false
	}
	return cj.brief(id), true
}

// Has reports whether job id is live.
func (jc *Cache) Has(id string) bool {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cj, ok := jc.jobs[id]
	return ok && !cj.deleted
}

// Page returns, sorted by id, the first n live jobs with an id after
// `after` ("": from the start) for which match holds, walking the ordered
// ids from `after` on until it has n. match runs under the cache's read
// lock and must not call the cache.
func (jc *Cache) Page(after string, n int, match func(*protocol.Job) bool) []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	out := make([]protocol.Job, 0, min(n, 64))
	jc.ids.AscendGreaterOrEqual(after, func(id string) bool {
		if id == after {
			return true
		}
		cj := jc.jobs[id]
		if cj.deleted {
			return true
		}
		if j := cj.spec(id, jc.intern.tab); match(&j) {
			out = append(out, j)
		}
		return len(out) < n
	})
	return out
}

// LiveWhere returns the live jobs for which pre (on the job's Brief) and
// keep (on its spec) hold, sorted by id, without copying the others: a
// one-shot job's spec is rebuilt only when pre holds. pre and keep run
// under the cache's read lock and must not call the cache.
func (jc *Cache) LiveWhere(pre func(Brief) bool, keep func(*protocol.Job) bool) []protocol.Job {
	jc.mu.RLock()
	var out []protocol.Job
	for id, cj := range jc.jobs {
		if cj.deleted || !pre(cj.brief(id)) {
			continue
		}
		if j := cj.spec(id, jc.intern.tab); keep(&j) {
			out = append(out, j)
		}
	}
	jc.mu.RUnlock()
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// Known reports whether the cache holds id at rev or a newer revision
// (put would change nothing).
func (jc *Cache) Known(id string, rev uint64) bool {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cur, ok := jc.jobs[id]
	return ok && cur.rev >= rev
}

// ChangedPeriodic returns the live periodic jobs that changed at or after
// since and that keep accepts (by id), in no order.
func (jc *Cache) ChangedPeriodic(since time.Time, keep func(id string) bool) []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	var out []protocol.Job
	for id, at := range jc.changed {
		if at < since.UnixNano() || !keep(id) {
			continue
		}
		if cj, ok := jc.jobs[id]; ok && !cj.deleted && cj.job != nil {
			out = append(out, *cj.job)
		}
	}
	return out
}

// Newer reports whether the cache holds job id at a revision after rev,
// and what it holds then: the live job, or deleted. The job-change driver
// sends the commands of a change toward the newest version it knows, so
// that a change that reaches it after a later one (two replicas' API
// calls, a forwarded request overtaken) never sends an older generation.
func (jc *Cache) Newer(id string, rev uint64) (job protocol.Job, deleted, newer bool) {
	jc.mu.RLock()
	cj, ok := jc.jobs[id]
	tab := jc.intern.tab
	jc.mu.RUnlock()
	if !ok || cj.rev <= rev {
		return protocol.Job{}, false, false
	}
	if cj.deleted {
		return protocol.Job{}, true, true
	}
	return cj.spec(id, tab), false, true
}

// Latest returns the newest version of job id the cache knows, given the
// version next of a change stored at rev (nil: a delete): next itself
// unless the cache holds a newer revision (Newer), then that job, or nil
// when it was deleted.
func (jc *Cache) Latest(id string, rev uint64, next *protocol.Job) *protocol.Job {
	cur, deleted, newer := jc.Newer(id, rev)
	switch {
	case !newer:
		return next
	case deleted:
		return nil
	}
	return &cur
}
