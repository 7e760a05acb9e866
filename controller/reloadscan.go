package controller

import (
	"context"
	"sync/atomic"

	"github.com/axsched/ax/pkg/protocol"
)

// reloadScanned is what the scan of a reload found in its shards.
type reloadScanned struct {
	pendingAll int               // PENDING with an agent
	unchecked  int               // records not checked (mayLack false)
	live       []*execRecord     // the executions of the shards that may lack a command or an event
	pending    []*execRecord     // those PENDING with an agent
	jobless    []*execRecord     // those PENDING whose job the cache does not hold
	joblessRev map[string]uint64 // their revisions, by exec id
	seen       map[string]bool   // exec ids of every execution of the shards
	retries    int               // RETRY_WAITING, timers re-armed or held (retrySent)
	// retrySent are the RETRY_WAITING executions whose next attempt's run
	// was sent (Sent): armSentRetries re-arms their timers once the
	// commands AX_CMD holds are known.
	retrySent []*execRecord
	// untracked counts the records of earlier versions (not Tracked);
	// indexed is set when the history index stood in for the scan
	// (reloadFromIndex): the counts above then cover only the records
	// read whole.
	untracked int
	indexed   bool
}

// reloadItem is what a reload's scan keeps of an execution of its shards:
// the record when the reload looks at it again (it may lack a command or
// an event, its retry timer is re-armed, or it waits to be placed), else
// only whether it is PENDING on an agent (for the count).
type reloadItem struct {
	rec     *execRecord
	check   bool // mayLack held
	pending bool
}

// reloadScan reads ax_execs once, re-arms the retry timers, records the
// PENDING executions waiting for an agent of the jobs for which in holds,
// and keeps whole only the records a reload looks at again: those that
// may lack a command or an event (mayLack; the others were written with
// their effects), the RETRY_WAITING ones and those waiting to be placed.
// in and mayLack run on the scan's decoding goroutines (scanExecsOf).
func (c *reloader) reloadScan(ctx context.Context, in func(jobID string) bool, mayLack func(*execRecord) bool) (reloadScanned, error) {
	n := 0
	if st, err := c.kv.Execs.Status(ctx); err == nil {
		n = int(st.Values()) // a size hint for the map below
	}
	a := c.newReloadAcc(in, mayLack, n)
	err := a.scan(ctx, 0)
	return a.result(), err
}

// newReloadAcc returns an empty accumulator; n is a size hint.
func (c *reloader) newReloadAcc(in func(jobID string) bool, mayLack func(*execRecord) bool, n int) *reloadAcc {
	return &reloadAcc{c: c, in: in, mayLack: mayLack, s: reloadScanned{joblessRev: map[string]uint64{}, seen: make(map[string]bool, n)}}
}

// scan adds the records of ax_execs a scan reads (scanExecsOf): each
// key's latest (from 0), or every record stored from sequence from on.
func (a *reloadAcc) scan(ctx context.Context, from uint64) error {
	return scanExecsOf(ctx, a.c.ex, a.pick, a.add, from)
}

// result is what was gathered.
func (a *reloadAcc) result() reloadScanned {
	a.s.untracked = int(a.untracked.Load())
	return a.s
}

// reloadAcc gathers what a reload reads of its shards' executions, from
// the scan (reloadScan) and from reads by key (reloadFromIndex).
type reloadAcc struct {
	c         *reloader
	in        func(jobID string) bool
	mayLack   func(*execRecord) bool
	s         reloadScanned
	untracked atomic.Int64 // records of earlier versions (not Tracked) among those picked
}

// pick is what the reload keeps of a record: nothing when its job is not
// in the shards. Safe for concurrent use (the scan's decoding goroutines).
func (a *reloadAcc) pick(r *execRecord) (reloadItem, bool) {
	if !a.in(r.JobID) {
		return reloadItem{}, false
	}
	if !r.Tracked {
		a.untracked.Add(1)
	}
	it := reloadItem{check: a.mayLack(r), pending: r.State == protocol.StatePending && r.Agent != ""}
	if it.check || r.State == protocol.StateRetryWaiting || (r.State == protocol.StatePending && r.Agent == "") {
		it.rec = r
	}
	return it, true
}

// add records a picked item; on one goroutine, each key once.
func (a *reloadAcc) add(key string, it reloadItem, rev uint64) {
	c, s := a.c, &a.s
	s.seen[key] = true
	if it.pending {
		s.pendingAll++
	}
	if !it.check {
		s.unchecked++
	}
	r := it.rec
	if r == nil {
		return
	}
	if it.check {
		s.live = append(s.live, r)
		if r.State == protocol.StatePending && !c.jobs.Has(r.JobID) {
			s.jobless = append(s.jobless, r)
			s.joblessRev[r.ExecID] = rev
		}
	}
	switch {
	case r.State == protocol.StateRetryWaiting && r.Sent == r.Attempt+1 && r.Agent != "":
		s.retrySent = append(s.retrySent, r)
		s.retries++
	case r.State == protocol.StateRetryWaiting:
		c.retries.schedule(r.ExecID, r.JobID, r.Attempt, r.NextAttemptAt)
		s.retries++
	case r.State == protocol.StatePending && r.Agent == "":
		c.place.NoteWaiting(r.ExecID, r.JobID)
	case r.State == protocol.StatePending && it.check:
		s.pending = append(s.pending, r)
	}
}
