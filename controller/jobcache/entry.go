package jobcache

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// cachedJob is one job's entry in the cache: its spec in full or compact
// form, its revision, and what a tombstone keeps.
type cachedJob struct {
	// job is the spec of a periodic job, or of a one-shot job compact
	// cannot hold (nil: a one-shot job held as one, or a tombstone that
	// keeps none). A pointer keeps the map's entries small: a page or a
	// reload's pass over the jobs copies an entry, not the whole spec.
	job *protocol.Job
	// one is a live one-shot job's spec in its compact form (compact.go;
	// Get expands it), "" when job or nothing is held: 300,000 delayed
	// one-shots are the case it is for.
	one string
	rev uint64
	// gen and at (unix nanoseconds: the job's CreatedAt; a tombstone's
	// deletion) are what Brief reports, and what one leaves out.
	gen     uint64
	at      int64
	flags   uint8
	deleted bool
}

// Flags of a cachedJob.
const (
	flagPaused uint8 = 1 << iota
	flagPeriodic
)

// Brief is what the cache tells of a live job without rebuilding its
// spec.
type Brief struct {
	ID         string
	Rev        uint64
	Periodic   bool
	Paused     bool
	Generation uint64
	CreatedAt  time.Time
}

// brief returns the Brief of live entry cj of id.
func (cj cachedJob) brief(id string) Brief {
	b := Brief{ID: id, Rev: cj.rev, Periodic: cj.flags&flagPeriodic != 0, Paused: cj.flags&flagPaused != 0, Generation: cj.gen}
	if cj.at != 0 {
		b.CreatedAt = time.Unix(0, cj.at).UTC()
	}
	return b
}

// spec returns the spec of live entry cj of id; tab is the cache's
// intern tables, read under its lock.
func (cj cachedJob) spec(id string, tab tables) protocol.Job {
	if cj.job != nil {
		return *cj.job
	}
	return expand(cj.one, tab, id, cj)
}

// entryOf returns the live entry of job at rev: a one-shot job in its
// compact form when it has one (its shared values interned in in, the
// form held in sl). Only a job held decoded is copied to the heap: a
// 300,000-job load made a garbage copy of every one-shot spec when job
// was taken by value.
func entryOf(job *protocol.Job, rev uint64, in *interner, sl *slab) cachedJob {
	cj := cachedJob{rev: rev, gen: job.Generation}
	if !job.CreatedAt.IsZero() {
		cj.at = job.CreatedAt.UnixNano()
	}
	if job.Paused {
		cj.flags |= flagPaused
	}
	if job.Periodic() {
		cj.flags |= flagPeriodic
	} else {
		b, ok := toCompact(sl.scratch, job, in)
		sl.scratch = b
		if ok && exactNanos(cj.at, job.CreatedAt) {
			cj.one = sl.add(b)
			return cj
		}
	}
	held := *job
	cj.job = &held
	return cj
}
