package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// sweepBatch bounds the executions read from the index at once. A pass
// takes batch after batch until the executions past the grace are all
// removed or it has run sweepBudget: a fixed number of batches a pass
// (40, 20,000 executions a minute) fell behind a steady 500 executions a
// second, and live state grew without bound.
const (
	sweepBatch = 500
	// deletedPerPass bounds the deleted jobs a pass takes from NoteDeleted
	// (four requests each, sweepParallel at a time).
	deletedPerPass = 5000
	sweepBudget    = 45 * time.Second
	// sweepParallel bounds the KV requests of a sweep in flight at once.
	sweepParallel = 32
)

// Sweep is one pass: purge the markers of the last pass that carry no TTL
// (kept in s: every marker on a server without per-message TTLs, else the
// delete markers of deleted jobs), remove the executions and one-shot jobs
// past the grace (and mark for purge the delete markers of deleted jobs
// whose executions all left), prune the index.
func (c *Retention) Sweep(ctx context.Context, s *Sweeper) error {
	c.purgeMarkers(ctx, s, time.Time{})
	return c.sweep(ctx, s)
}

// sweep is a pass without the purge of the last pass's markers (Sweep).
func (c *Retention) sweep(ctx context.Context, s *Sweeper) error {
	if err := c.ensureStreams(ctx, s); err != nil {
		return err
	}
	now := c.now()
	shards := c.own.OwnedShards()
	removed, err := c.removeExecs(ctx, s, now, shards)
	if err != nil {
		return err
	}
	// Deleted jobs of the shards this replica works, deletedPerPass a pass.
	for _, id := range c.takeDeleted(deletedPerPass) {
		if c.own.OwnsJob(id) {
			s.jobs[id] = true
		}
	}
	retired, err := c.retireJobs(ctx, s, now)
	if err != nil {
		return err
	}
	pruned := int64(0)
	for {
		n, err := c.idx.Prune(ctx, now.Add(-c.cfg.Grace-c.cfg.HistoryRetention), now.Add(-c.cfg.HistoryRetention), shards, 5000)
		if err != nil {
			return err
		}
		if pruned += n; n < 5000 {
			break
		}
	}
	c.jobs.PruneTombstones(c.now().Add(-jobcache.TombstoneKeep), c.now().Add(-jobcache.DeletedFireKeep))
	count(c.m.Removed, KindExecution, removed)
	count(c.m.Removed, KindJob, retired)
	if s.behind {
		count(c.m.Passes, EndedBudget, 1)
	} else {
		count(c.m.Passes, EndedDone, 1)
	}
	if removed+retired > 0 || pruned > 0 {
		c.log.Info("history sweep", "executions_removed", removed, "jobs_retired", retired, "history_pruned", pruned,
			"behind", s.behind)
	}
	return nil
}

// removeExecs removes the executions of shards that ended before the grace
// (relative to now), batch after batch until none is left or the budget
// has passed (then s.behind is set), and adds their jobs to s.jobs, to be
// looked at for retirement. It returns how many it removed.
func (c *Retention) removeExecs(ctx context.Context, s *Sweeper, now time.Time, shards []int) (int, error) {
	removed := 0
	start := c.mono()
	size, budget := sweepBatch, sweepBudget
	if c.cfg.Batch > 0 {
		size = c.cfg.Batch
	}
	if c.cfg.Budget > 0 {
		budget = c.cfg.Budget
	}
	s.behind = false
	for {
		batch, err := c.idx.EndedBefore(ctx, now.Add(-c.cfg.Grace), shards, size)
		if err != nil {
			return removed, err
		}
		// The KV requests of a batch run sweepParallel at a time; the
		// index learns of the removals in one transaction.
		gone := make([]bool, len(batch))
		var mu sync.Mutex
		var failed failures
		parallel(len(batch), sweepParallel, func(i int) {
			ok, m, err := c.retireExec(ctx, batch[i].ExecID, now)
			if err != nil {
				failed.add(batch[i].ExecID, err)
				return
			}
			gone[i] = ok
			if m != nil {
				mu.Lock()
				s.markers = append(s.markers, pendingMarker{*m, c.mono()})
				mu.Unlock()
			}
		})
		failed.log(c.log, "history sweep: remove executions", "exec")
		var ids []string
		for i, e := range batch {
			if gone[i] {
				ids, s.jobs[e.JobID] = append(ids, e.ExecID), true
			}
		}
		if err := c.idx.MarkGone(ctx, ids); err != nil {
			return removed, err
		}
		removed += len(ids)
		if len(batch) < size || len(ids) == 0 {
			return removed, nil
		}
		if c.mono().Sub(start) >= budget {
			s.behind = true // a full batch, all or part of it removed: more may wait
			return removed, nil
		}
	}
}

// retireJobs looks at the one-shot jobs of s.jobs and retires those whose
// executions have all ended and left live state, sweepParallel at a time
// (one after the other, four round trips each, they retired fewer one-shot
// jobs a second than a steady 250 a second made). A job is retired only
// once the index holds every event stored so far: an execution made a
// moment ago (a trigger of the job) must be in it before "all its
// executions ended" can be believed; when it does not, the jobs wait for
// the next pass. A job with an execution still open is dropped from s.jobs
// (it comes back when that one is removed). It returns how many it retired.
func (c *Retention) retireJobs(ctx context.Context, s *Sweeper, now time.Time) (int, error) {
	jobsStream := s.streams[streams.KVStream(protocol.BucketJobs)] // looked up by ensureStreams
	if len(s.jobs) == 0 || jobsStream == nil || !c.host.IndexUpToDate(ctx) {
		return 0, nil
	}
	all := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		all = append(all, id)
	}
	finished, err := c.idx.JobsDone(ctx, all)
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, id := range all {
		if finished[id] {
			ids = append(ids, id)
		} else {
			delete(s.jobs, id)
		}
	}
	retired := 0
	done := make([]bool, len(ids))
	var mu sync.Mutex
	var failed failures
	parallel(len(ids), sweepParallel, func(i int) {
		ok, ms, err := c.retireJob(ctx, jobsStream, ids[i], now)
		if err != nil {
			failed.add(ids[i], err)
			return
		}
		mu.Lock()
		done[i] = true
		for _, m := range ms {
			s.markers = append(s.markers, pendingMarker{m, c.mono()})
		}
		if ok {
			retired++
		}
		mu.Unlock()
	})
	failed.log(c.log, "history sweep: retire jobs", "job")
	for i, id := range ids {
		if done[i] {
			delete(s.jobs, id)
		}
	}
	return retired, nil
}

// retireExec removes a terminal execution whose grace has passed from
// ax_execs; true when it is gone (or was already), with the purge marker
// to remove on the next pass.
func (c *Retention) retireExec(ctx context.Context, id string, now time.Time) (bool, *execstore.Marker, error) {
	v, err := c.execs.Get(ctx, id)
	if err != nil {
		return false, nil, err
	}
	_, _, err = execution.Apply(v.Rec, execution.Expiry{Grace: c.cfg.Grace}, execution.Env{Now: now})
	switch {
	case errors.Is(err, execution.ErrNoRecord):
		return true, nil, nil
	case errors.Is(err, execution.ErrNotExpired):
		return false, nil, nil // changed since the index saw it (an operator's retry)
	case err != nil:
		return false, nil, err
	}
	// The one effect is execution.Retire, done with the revision read.
	m, err := c.execs.Retire(ctx, id, v.Rev)
	if errors.Is(err, execstore.ErrCASConflict) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return true, m, nil
}

// ensureStreams looks up the KV streams of ax_execs, ax_jobs and ax_idem
// once, for the passes of s.
func (c *Retention) ensureStreams(ctx context.Context, s *Sweeper) error {
	for _, name := range []string{protocol.BucketExecs, protocol.BucketJobs, protocol.BucketIdem} {
		if _, ok := s.streams[streams.KVStream(name)]; !ok {
			st, err := c.js.Stream(ctx, streams.KVStream(name))
			if err != nil {
				return fmt.Errorf("history sweep: stream %s: %w", streams.KVStream(name), err)
			}
			s.streams[streams.KVStream(name)] = st
		}
	}
	return nil
}

// purgeMarkers purges the markers of the last passes written at or before
// upTo (all of them when upTo is zero), sweepParallel at a time, and keeps
// the others.
func (c *Retention) purgeMarkers(ctx context.Context, s *Sweeper, upTo time.Time) {
	if len(s.markers) == 0 {
		return
	}
	if err := c.ensureStreams(ctx, s); err != nil {
		c.log.Warn("history sweep: purge markers", "err", err)
		return
	}
	var due, keep []pendingMarker
	for _, m := range s.markers {
		if upTo.IsZero() || !m.at.After(upTo) {
			due = append(due, m)
		} else {
			keep = append(keep, m)
		}
	}
	var failed failures
	parallel(len(due), sweepParallel, func(i int) {
		m := due[i]
		if err := s.streams[m.Stream].Purge(ctx, jetstream.WithPurgeSubject(m.Subject), jetstream.WithPurgeSequence(m.Seq+1)); err != nil {
			failed.add(m.Subject, err)
		}
	})
	failed.log(c.log, "history sweep: purge markers", "subject")
	s.markers = keep
}

// failures gathers the errors of one parallel step of a pass, so that the
// step logs one line however many of its requests failed (a NATS outage
// fails every one of them). Safe for concurrent use; the zero value is
// ready.
type failures struct {
	mu      sync.Mutex
	n       int
	firstID string
	first   error
}

// add records the failure of the request for id.
func (f *failures) add(id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.firstID, f.first = id, err
	}
	f.n++
}

// log writes one warning, what, with the number of failures and the first
// of them (its id as key), if there was any.
func (f *failures) log(l *slog.Logger, what, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		l.Warn(what, "failed", f.n, key, f.firstID, "err", f.first)
	}
}

// parallel runs fn(0..n-1), at most k at a time, and waits for them.
func parallel(n, k int, fn func(i int)) {
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
