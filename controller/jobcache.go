package controller

import (
	"context"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/google/btree"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// jobCache mirrors KV ax_jobs in memory: loaded at start, kept current by
// a watcher and by the controller's own writes. Entries carry the KV
// revision; an older revision never replaces a newer one, and deletions
// stay as tombstones so that a late watcher update cannot revive a job,
// for tombstoneKeep (pruneTombstones): the cache holds live jobs only.
type jobCache struct {
	mu   sync.RWMutex
	jobs map[string]cachedJob
	// groupAny indexes the live group jobs of mode any (protocol.Job.GroupAny), the
	// ones the ownership loop looks at on every pass.
	groupAny map[string]struct{}
	// groupAll indexes the live periodic group jobs of mode all, and
	// pinned the live periodic jobs pinned to each agent: the only jobs a
	// registration looks at (reconcileAgent), so that its cost does not
	// grow with the controller's job count.
	groupAll map[string]struct{}
	pinned   map[string]map[string]struct{}
	// ids holds the ids of the live jobs in order, for the pages of
	// ListJobs: a page of 50 of 300,000 jobs reads 50 ids (and the ones
	// its filter turns away), not every entry of the map.
	ids *btree.BTreeG[string]
	// now dates tombstones (the controller's clock; nil: time.Now).
	now func() time.Time
}

type cachedJob struct {
	// job is the spec (nil: a tombstone that keeps none). A pointer keeps
	// the map's entries small: a page or a reload's pass over 300,000
	// jobs copies 48 bytes an entry, not the whole spec.
	job       *protocol.Job
	rev       uint64
	deleted   bool
	deletedAt time.Time // for pruneTombstones
}

// tombstoneKeep is how long a deleted job's tombstone stays in the cache:
// far longer than a watcher update or a write's answer is late.
const tombstoneKeep = time.Minute

// deletedFireKeep is how long the tombstone of a deleted periodic job keeps
// its spec: a fire the agent made before it applied the unassign (in
// flight at the delete, or while its link was down) is reported up to this
// long after and still recorded (the default reports.dedup_window; a replay
// after it is refused by the live record or the history, so the two need
// not match).
const deletedFireKeep = 2 * time.Hour

func newJobCache() *jobCache {
	return &jobCache{jobs: map[string]cachedJob{}, groupAny: map[string]struct{}{},
		groupAll: map[string]struct{}{}, pinned: map[string]map[string]struct{}{},
		ids: btree.NewG(32, func(a, b string) bool { return a < b })}
}

// reserve sizes an empty cache for n jobs.
func (jc *jobCache) reserve(n int) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	if len(jc.jobs) == 0 {
		jc.jobs = make(map[string]cachedJob, n)
	}
}

// index adds (add true) or removes live job j from the indexes.
func (jc *jobCache) index(j protocol.Job, add bool) {
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

// put records job at rev unless a newer revision is known.
func (jc *jobCache) put(job protocol.Job, rev uint64) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	cur, ok := jc.jobs[job.ID]
	if ok && cur.rev >= rev {
		return
	}
	if ok && !cur.deleted {
		jc.index(*cur.job, false)
	}
	jc.jobs[job.ID] = cachedJob{job: &job, rev: rev}
	jc.index(job, true)
	if !ok || cur.deleted {
		jc.ids.ReplaceOrInsert(job.ID)
	}
}

// remove records the deletion of id at rev.
func (jc *jobCache) remove(id string, rev uint64) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	cur, ok := jc.jobs[id]
	if ok && cur.rev >= rev {
		return
	}
	var last *protocol.Job
	if ok && !cur.deleted {
		jc.ids.Delete(id)
		jc.index(*cur.job, false)
		if cur.job.Periodic() {
			last = cur.job
		}
	}
	at := time.Now()
	if jc.now != nil {
		at = jc.now()
	}
	jc.jobs[id] = cachedJob{job: last, rev: rev, deleted: true, deletedAt: at}
}

// deletedPeriodic returns the spec of periodic job id and when this
// replica saw it deleted, while its tombstone is kept (deletedFireKeep):
// the reports of fires an agent made before it learned of the deletion
// are still recorded (authorizeCreate).
func (jc *jobCache) deletedPeriodic(id string) (protocol.Job, time.Time, bool) {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cj, ok := jc.jobs[id]
	if !ok || !cj.deleted || cj.job == nil {
		return protocol.Job{}, time.Time{}, false
	}
	return *cj.job, cj.deletedAt, true
}

// pinnedTo returns the live periodic jobs pinned to agent, sorted by id.
func (jc *jobCache) pinnedTo(agent string) []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return jc.sorted(jc.pinned[agent])
}

// groupAllJobs returns the live periodic group jobs of mode all, sorted by id.
func (jc *jobCache) groupAllJobs() []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return jc.sorted(jc.groupAll)
}

// sorted returns the jobs of ids sorted by id. Called with mu held.
func (jc *jobCache) sorted(ids map[string]struct{}) []protocol.Job {
	out := make([]protocol.Job, 0, len(ids))
	for id := range ids {
		out = append(out, *jc.jobs[id].job)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// pruneTombstones drops the tombstones of jobs deleted before t, and those
// of periodic jobs (which keep the job's spec) deleted before periodicT.
func (jc *jobCache) pruneTombstones(t, periodicT time.Time) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	for id, cj := range jc.jobs {
		if cj.deleted && cj.deletedAt.Before(t) && (cj.job == nil || cj.deletedAt.Before(periodicT)) {
			delete(jc.jobs, id)
		}
	}
}

// size returns the number of entries, tombstones included.
func (jc *jobCache) size() int {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	return len(jc.jobs)
}

// groupAnyJobs returns the live group jobs of mode any, in no order.
func (jc *jobCache) groupAnyJobs() []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	out := make([]protocol.Job, 0, len(jc.groupAny))
	for id := range jc.groupAny {
		out = append(out, *jc.jobs[id].job)
	}
	return out
}

// get returns a live job.
func (jc *jobCache) get(id string) (protocol.Job, uint64, bool) {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cj, ok := jc.jobs[id]
	if !ok || cj.deleted {
		return protocol.Job{}, 0, false
	}
	return *cj.job, cj.rev, true
}

// page returns, sorted by id, the first n live jobs with an id after
// `after` ("": from the start) for which match holds, walking the ordered
// ids from `after` on until it has n. match runs under the cache's read
// lock and must not call the cache.
func (jc *jobCache) page(after string, n int, match func(*protocol.Job) bool) []protocol.Job {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	out := make([]protocol.Job, 0, min(n, 64))
	jc.ids.AscendGreaterOrEqual(after, func(id string) bool {
		if id == after {
			return true
		}
		if cj := jc.jobs[id]; !cj.deleted && match(cj.job) {
			out = append(out, *cj.job)
		}
		return len(out) < n
	})
	return out
}

// liveWhere returns the live jobs for which keep holds, sorted by id,
// without copying the others. keep runs under the cache's read lock and
// must not call the cache.
func (jc *jobCache) liveWhere(keep func(*protocol.Job) bool) []protocol.Job {
	jc.mu.RLock()
	var out []protocol.Job
	for _, cj := range jc.jobs {
		if !cj.deleted && keep(cj.job) {
			out = append(out, *cj.job)
		}
	}
	jc.mu.RUnlock()
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// known reports whether the cache holds id at rev or a newer revision
// (put would change nothing).
func (jc *jobCache) known(id string, rev uint64) bool {
	jc.mu.RLock()
	defer jc.mu.RUnlock()
	cur, ok := jc.jobs[id]
	return ok && cur.rev >= rev
}

// apply records one KV entry (a put or a delete).
func (jc *jobCache) apply(e jetstream.KeyValueEntry, log *slog.Logger) {
	if e.Operation() != jetstream.KeyValuePut {
		jc.remove(e.Key(), e.Revision())
		return
	}
	if jc.known(e.Key(), e.Revision()) {
		// This replica's own write, already put at its revision (CreateJob,
		// mutateJob): not decoded a second time.
		return
	}
	var j protocol.Job
	if err := storedjson.Unmarshal(e.Value(), &j); err != nil {
		log.Error("bad job record in KV", "key", e.Key(), "err", err)
		return
	}
	jc.put(j, e.Revision())
}

// follow starts a watcher on the bucket (in runCtx), applies every
// existing job before returning, then keeps applying changes (other
// replicas' writes too) on a goroutine started by goRun.
func (jc *jobCache) follow(ctx, runCtx context.Context, kv jetstream.KeyValue, log *slog.Logger, goRun func(func(context.Context))) error {
	if st, err := kv.Status(ctx); err == nil && st.Values() > 0 {
		jc.reserve(int(st.Values())) // one allocation instead of a rehash per doubling
	}
	w, err := kv.WatchAll(runCtx)
	if err != nil {
		return err
	}
	return followKVWith(ctx, w, func(e jetstream.KeyValueEntry) { jc.apply(e, log) }, runtime.GOMAXPROCS(0), goRun)
}
