package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// Lifecycle and retention (docs/architecture.md: A job's way, step 7).
//
// A terminal execution leaves live state — its key in ax_execs — the live
// grace (liveGrace: reports.dedup_window, default 2h, the Msg-Id
// de-duplication window of AX_RPT) after its last change; a one-shot
// job whose executions have all left it leaves the live job set (ax_jobs,
// every replica's job cache) in the same pass, and its idempotency key is
// released. Both stay in every replica's history index (history.go) for
// history.retention after they left live state (an execution's rows go
// the grace + history.retention after its last change, on every replica
// alike, whichever swept it); the index serves them
// (GetExecution, ListExecutions, ListJobs with Retired) and refuses the
// reports of an execution it holds that left live state (ingest/lanes.go), so a
// late or replayed report never makes a new record of it.
//
// The removal is an explicit sweeper, run by the owner of each shard for
// the executions of its jobs, not KV per-message TTLs:
//   - a job leaves when all its executions have: a condition, not an age,
//     which no TTL expresses;
//   - a TTL would have to be put on every terminal write (the report
//     lanes' raw publishes, and kv.Update, which drops a per-key TTL) and
//     taken off again by an operator's retry of a FAILED execution; the
//     sweeper decides when it removes, with compare-and-set on the
//     revision it read, so a record changed meanwhile stays;
//   - the grace runs on the controller's clock (Config.Clock), the one
//     the records' updated_at are written with, and tests step it;
//   - the buckets stay as they are: AllowMsgTTL cannot be turned off once
//     set and needs nats-server ≥ 2.11 on an external cluster.
//
// The sweeper finds its candidates in the history index (terminal, ended
// before the grace, of a shard this replica works), not by scanning the
// bucket. Each removal is a purge marker published with the revision read
// (KV-Operation PURGE, rollup of the subject: the record goes) and, one
// pass later (so that the replicas' watchers of ax_jobs have seen the
// marker), a purge of the subject up to the marker: nothing is left in
// the stream, so ax_execs and ax_jobs hold only live work and a restart
// or a shard takeover reads only that. A marker whose purge a crash cut
// off stays (one small message per key).

// liveGrace is how long a terminal execution stays in live state after its
// last change: reports.dedup_window, the Msg-Id de-duplication window the
// controller sets on AX_RPT. Never shorter than that window: a replayed
// report the stream no longer drops finds the execution live (the state
// machine refuses a step it made) or in history (inHistory refuses it).
func (c *core) liveGrace() time.Duration { return c.cfg.Reports.DedupWindow }

// controllerDedupWindow is the Msg-Id de-duplication window of AX_EVT and
// AX_CMD, the streams only controllers publish to: twice ack_wait, at
// least streams.DefaultControllerDuplicates (2m); streams.Config caps it
// at Duplicates, reports.dedup_window.
//
// A controller publishes an event again (same Msg-Id) when a publish is
// retried, when a redelivered report repeats steps already applied (after
// ack_wait, to the shard's next owner when a replica died), and when a
// reload restores an event the history index lacks (it waits until the
// index holds every stored event first, so a stored one is not sent
// again). The window covers the first two; a report redelivered later
// than it (a controller killed between storing an event and acknowledging
// its report, and down longer than the window) stores its event a second
// time, which the history index ignores (it keeps an execution's newest
// snapshot) and a plain subscriber sees twice.
//
// It publishes a run command again when a publish is retried, when a
// PENDING execution is created again (execution.SendRun with Resend), and
// when a reload finds a placed PENDING record whose command AX_CMD does
// not hold (sentruns.go: it reads the commands before it sends one). A
// command stored twice reaches its agent twice, and the agent stores an
// attempt of an execution once (its SQLite key is exec_id and attempt),
// so a window longer than the publish retries protects nothing more.
//
// The server holds every Msg-Id within a window in memory (about 240
// bytes in a heap profile of the soak) and reads them all back at every
// start: at 500 executions a second (about four events each) a 2h window
// would hold about 14 million of them, over 3 GiB, and 300,000 delayed
// one-shots held their 300,000 run commands' Msg-Ids for 2h (48 MB of
// heap after a restart, and a read of every command at the start).
func (c *core) controllerDedupWindow() time.Duration {
	return max(2*c.cfg.AckWait, streams.DefaultControllerDuplicates)
}

// defaultHistorySweep is how often the sweeper runs.
const defaultHistorySweep = time.Minute

// sweepBatch bounds the executions read from the index at once. A pass
// takes batch after batch until the executions past the grace are all
// removed or it has run sweepBudget: a fixed number of batches a pass
// (40, 20,000 executions a minute) fell behind a steady 500 executions a
// second, and live state grew without bound.
const (
	sweepBatch  = 500
	sweepBudget = 45 * time.Second
	// sweepParallel bounds the KV requests of a sweep in flight at once.
	sweepParallel = 32
)

// sweeper is the state of retentionLoop.
type sweeper struct {
	markers []execstore.Marker
	streams map[string]jetstream.Stream
	// jobs are one-shot jobs some of whose executions left live state,
	// still to be looked at for retirement (retireJob).
	jobs map[string]bool
}

// retentionLoop runs a sweep every historySweep until ctx ends.
func (c *retention) retentionLoop(ctx context.Context) {
	every := c.cfg.historySweep
	if every <= 0 {
		every = defaultHistorySweep
	}
	s := &sweeper{streams: map[string]jetstream.Stream{}, jobs: map[string]bool{}}
	c.every(ctx, every, every, "history sweep", func(ctx context.Context) error { return c.sweep(ctx, s) })
}

// sweep is one pass: purge the markers of the last pass, remove the
// executions and one-shot jobs past the grace, prune the index.
func (c *retention) sweep(ctx context.Context, s *sweeper) error {
	c.purgeMarkers(ctx, s)
	now := c.now()
	shards := c.own.OwnedShards()
	jobs := map[string]bool{}
	removed := 0
	start := c.mono()
	size := sweepBatch
	if c.cfg.historySweepBatch > 0 {
		size = c.cfg.historySweepBatch
	}
	for {
		batch, err := c.hist.idx.EndedBefore(ctx, now.Add(-c.liveGrace()), shards, size)
		if err != nil {
			return err
		}
		// The KV requests of a batch run sweepParallel at a time; the
		// index learns of the removals in one transaction.
		gone := make([]bool, len(batch))
		var mu sync.Mutex
		parallel(len(batch), sweepParallel, func(i int) {
			ok, m, err := c.retireExec(ctx, batch[i].ExecID, now)
			if err != nil {
				c.log.Warn("history sweep: remove execution", "exec", batch[i].ExecID, "err", err)
				return
			}
			gone[i] = ok
			if m != nil {
				mu.Lock()
				s.markers = append(s.markers, *m)
				mu.Unlock()
			}
		})
		var ids []string
		for i, e := range batch {
			if gone[i] {
				ids, jobs[e.JobID] = append(ids, e.ExecID), true
			}
		}
		if err := c.hist.idx.MarkGone(ctx, ids); err != nil {
			return err
		}
		removed += len(ids)
		if len(batch) < size || len(ids) == 0 || c.mono().Sub(start) >= sweepBudget {
			break
		}
	}
	// A job is retired only once the index holds every event stored so
	// far: an execution made a moment ago (a trigger of the job) must be
	// in it before "all its executions ended" can be believed. Jobs not
	// decided in this pass wait for the next one.
	if s.jobs == nil {
		s.jobs = map[string]bool{}
	}
	for id := range jobs {
		s.jobs[id] = true
	}
	retired := 0
	if len(s.jobs) > 0 && c.hist.upToDate(ctx) {
		// sweepParallel at a time: one after the other (four round trips
		// each) they retired fewer one-shot jobs a second than a steady
		// 250 a second made.
		ids := make([]string, 0, len(s.jobs))
		for id := range s.jobs {
			ids = append(ids, id)
		}
		done := make([]bool, len(ids))
		var mu sync.Mutex
		parallel(len(ids), sweepParallel, func(i int) {
			ok, ms, err := c.retireJob(ctx, ids[i], now)
			if err != nil {
				c.log.Warn("history sweep: retire job", "job", ids[i], "err", err)
				return
			}
			mu.Lock()
			done[i] = true
			s.markers = append(s.markers, ms...)
			if ok {
				retired++
			}
			mu.Unlock()
		})
		for i, id := range ids {
			if done[i] {
				delete(s.jobs, id)
			}
		}
	}
	pruned := int64(0)
	for {
		n, err := c.hist.idx.Prune(ctx, now.Add(-c.liveGrace()-c.cfg.History.Retention), now.Add(-c.cfg.History.Retention), shards, 5000)
		if err != nil {
			return err
		}
		if pruned += n; n < 5000 {
			break
		}
	}
	c.jobs.PruneTombstones(c.now().Add(-jobcache.TombstoneKeep), c.now().Add(-jobcache.DeletedFireKeep))
	if removed+retired > 0 || pruned > 0 {
		c.log.Info("history sweep", "executions_removed", removed, "jobs_retired", retired, "history_pruned", pruned)
	}
	return nil
}

// retireExec removes a terminal execution whose grace has passed from
// ax_execs; true when it is gone (or was already), with the purge marker
// to remove on the next pass.
func (c *retention) retireExec(ctx context.Context, id string, now time.Time) (bool, *execstore.Marker, error) {
	v, err := c.ex.readExec(ctx, id)
	if err != nil {
		return false, nil, err
	}
	_, _, err = execution.Apply(v.Rec, execution.Expiry{Grace: c.liveGrace()}, execution.Env{Now: now})
	switch {
	case errors.Is(err, execution.ErrNoRecord):
		return true, nil, nil
	case errors.Is(err, execution.ErrNotExpired):
		return false, nil, nil // changed since the index saw it (an operator's retry)
	case err != nil:
		return false, nil, err
	}
	// The one effect is execution.Retire, done with the revision read.
	m, err := c.ex.execs().Retire(ctx, id, v.Rev)
	if errors.Is(err, execstore.ErrCASConflict) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return true, m, nil
}

// purgeMarkers purges the markers of the last pass, sweepParallel at a time.
func (c *retention) purgeMarkers(ctx context.Context, s *sweeper) {
	for _, name := range []string{protocol.BucketExecs, protocol.BucketJobs, protocol.BucketIdem} {
		if _, ok := s.streams[streams.KVStream(name)]; !ok {
			st, err := c.js.Stream(ctx, streams.KVStream(name))
			if err != nil {
				c.log.Warn("history sweep: stream", "stream", streams.KVStream(name), "err", err)
				return
			}
			s.streams[streams.KVStream(name)] = st
		}
	}
	parallel(len(s.markers), sweepParallel, func(i int) {
		m := s.markers[i]
		if err := s.streams[m.Stream].Purge(ctx, jetstream.WithPurgeSubject(m.Subject), jetstream.WithPurgeSequence(m.Seq+1)); err != nil {
			c.log.Warn("history sweep: purge marker", "subject", m.Subject, "err", err)
		}
	})
	s.markers = s.markers[:0]
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

// retireJob removes one-shot job id from the live job set when every
// execution it has in the index ended and left live state; it records the
// job in history first (protocol.JobRetired on AX_EVT). It returns the
// purge markers it wrote, for the next pass to purge; safe to run for
// several jobs at once.
func (c *retention) retireJob(ctx context.Context, id string, now time.Time) (bool, []execstore.Marker, error) {
	j, rev, err := c.jobsvc.readJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if j.Periodic() || now.Sub(j.CreatedAt) < c.liveGrace() {
		return false, nil, nil
	}
	if done, err := c.hist.idx.JobDone(ctx, id); err != nil || !done {
		return false, nil, err
	}
	data, err := protocol.Encode(protocol.JobRetired{V: protocol.Version, Job: j, At: now})
	if err != nil {
		return false, nil, fmt.Errorf("retire job %s: encode: %w", id, err)
	}
	msgID := "retired/" + id + "/" + strconv.FormatUint(j.Generation, 10)
	if _, err := c.js.Publish(ctx, protocol.JobRetiredSubject(id), data, jetstream.WithMsgID(msgID)); err != nil {
		return false, nil, fmt.Errorf("retire job %s: record in history: %w", id, err)
	}
	seq, err := c.purgeKey(ctx, protocol.BucketJobs, id, rev)
	if errors.Is(err, execstore.ErrCASConflict) {
		return false, nil, nil // updated meanwhile; its retirement in history is overwritten by the next one
	}
	if err != nil {
		return false, nil, fmt.Errorf("retire job %s: %w", id, err)
	}
	ms := []execstore.Marker{{Stream: streams.KVStream(protocol.BucketJobs), Subject: streams.KVSubject(protocol.BucketJobs, id), Seq: seq}}
	c.jobs.Remove(id, seq)
	if j.IdempotencyKey != "" {
		k := idemKey(j.IdempotencyKey)
		if e, err := c.kv.Idem.Get(ctx, k); err == nil && string(e.Value()) == id {
			if iseq, err := c.purgeKey(ctx, protocol.BucketIdem, k, e.Revision()); err == nil {
				ms = append(ms, execstore.Marker{Stream: streams.KVStream(protocol.BucketIdem), Subject: streams.KVSubject(protocol.BucketIdem, k), Seq: iseq})
			}
		}
	}
	c.log.Debug("job retired", "job", id, "name", j.Name)
	return true, ms, nil
}

// purgeKey publishes a purge marker on key (the KV purge: the subject's
// earlier messages go) with compare-and-set on rev, and returns its
// sequence. A lost compare-and-set is errCASConflict.
func (c *retention) purgeKey(ctx context.Context, bucket, key string, rev uint64) (uint64, error) {
	m := nats.NewMsg(streams.KVSubject(bucket, key))
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := c.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	if streams.IsWrongLastSeq(err) {
		return 0, execstore.ErrCASConflict
	}
	if err != nil {
		return 0, fmt.Errorf("purge %s/%s: %w", bucket, key, err)
	}
	return ack.Sequence, nil
}

// inHistory reports whether execution id, which has no record in
// ax_execs, left live state (the history index holds it): its reports are
// then refused. An execution scheduled less than half the grace
// (liveGrace) ago cannot have, and is not looked up.
func (c *execService) inHistory(ctx context.Context, id string) (protocol.Execution, bool) {
	_, sched, err := protocol.ParseExecID("exec_id", id)
	if err != nil || c.now().Sub(sched) < c.liveGrace()/2 {
		return protocol.Execution{}, false
	}
	e, ok, err := c.hist.idx.Get(ctx, id)
	if err != nil {
		c.log.Warn("history lookup", "exec", id, "err", err)
		return protocol.Execution{}, false
	}
	return e, ok
}
