package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/histindex"
	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// The execution history (docs/architecture.md: A job's way, step 7): every replica keeps a SQLite index
// (package histindex) of every execution, live or ended, and of the one-shot
// jobs retired from the live job set (controller/retention), built from AX_EVT
// alone. Each event carries the execution's snapshot right after its
// transition (protocol.Event.Execution); each job retirement is a
// protocol.JobRetired on ax.evt.job.retired.<partition> (.<job> from
// earlier controllers). An ordered consumer
// reads the stream from the sequence after the one stored in the index,
// and each batch of rows is written in one transaction with the sequence
// of its last message, so a restart resumes exactly where the last commit
// ended, and a deleted index file is rebuilt from the stream (as far back
// as AX_EVT keeps events, 7 days; history.retention may not exceed it).
//
// Staleness: the index lags AX_EVT by the time the follower gathers and
// applies a batch (up to historyLinger, 1s, and the commit, when it
// keeps up; after a restart with a deleted file, until it has read the
// stream). A reader that needs the index current does not wait out the
// linger: waitFor asks the follower to commit what it has gathered at
// once (history.flush). The linger is long because a commit costs more
// than its rows: under load, the longer batch turns the three or four
// events of one execution into one row write, and the index pages that
// every row touches are written once per commit, not once per row (the
// follower's CPU per execution fell by about a third from a 10ms linger;
// from 1,000-event batches and 250ms to 4,000 and 1s, the controller's
// CPU per execution of bench/vsasynq's periodic workload fell from 0.81
// to 0.69 ms, medians of 3 alternating runs, each run lower).
// The snapshots of live executions wait longer (histindex.Holdback, up
// to historyHold): a one-shot run's PENDING snapshot is usually
// superseded by its finished one within the second, and then never
// written (the history follower's share of the controller's CPU under
// bench/vsasynq's dispatch workload fell from 14.5 % to 6.6 %). A
// snapshot whose next step is not due within the hold (a delayed
// one-shot's PENDING) is not held: a reader's commit would write every
// one of a burst's last seconds at once. The
// cursor stays before the oldest snapshot held, so a restart reads it
// again; waitFor's commit writes everything held, so a reader that waits
// sees it.
// ListExecutions first waits, for at
// most historyReadWait, until the index has applied every event stored
// when the call began; the events of a write the caller made through this
// controller's API are stored before the call returned (execEffects
// waits for their acknowledgement), so the caller's own writes are seen.
// GetExecution reads ax_execs first: an execution still in live state is
// always read as stored, and the index answers only for one that left it.

const (
	// historyFile is the index's file name under DataDir.
	historyFile = "history.db"
	// historyBatch bounds the events applied in one transaction.
	historyBatch = 4000
	// historyReadWait bounds how long a list waits for the index to catch up.
	historyReadWait = 2 * time.Second
	// historyLinger is how long the follower gathers events before a
	// commit when no reader is waiting for it.
	historyLinger = time.Second
	// historyHold is how long the follower holds back the snapshot of a
	// live execution for the one that supersedes it (histindex.Holdback),
	// and historyHeldMax how many it holds at most.
	historyHold    = 5 * time.Second
	historyHeldMax = 10000
	// historyQuietMargin is added to historyHold for the snapshots not
	// held at all (histindex.Quiet): a PENDING execution scheduled more
	// than hold + margin ahead is written at once. The margin covers an
	// agent whose clock runs ahead of the controller's (clock.max_skew,
	// 2s by default); a snapshot superseded within the hold all the same
	// costs one more row write, nothing else.
	historyQuietMargin = 10 * time.Second
	// historyIdleRelease is the window over which the follower counts
	// the rows it applied: at the end of a window with fewer than
	// historyQuietRows, and rows applied since its last release, it frees
	// the index writer's page cache (histindex.Index.ReleaseMemory). So a
	// burst's cache is freed a minute or two after the burst, also when a
	// trickle of events follows it, and never under steady traffic, whose
	// commits read the cached pages again.
	historyIdleRelease = time.Minute
	historyQuietRows   = 1000
)

// history follows AX_EVT into the index.
type history struct {
	c   *core
	idx *histindex.Index
	evt jetstream.Stream

	mu      sync.Mutex
	applied uint64        // the AX_EVT sequence applied last
	wake    chan struct{} // closed (and replaced) when applied moves
	flush   chan struct{} // a reader waits: commit what is gathered now (buffered, 1)
	caught  atomic.Bool   // the follower has read everything the stream had
}

// openHistory opens the index (DataDir/history.db; in memory without a
// DataDir), checks its cursor against the stream, and starts the follower.
func (c *core) openHistory(ctx context.Context) error {
	path := ""
	if c.cfg.DataDir != "" {
		if err := os.MkdirAll(c.cfg.DataDir, 0o750); err != nil {
			return fmt.Errorf("history index: %w", err)
		}
		path = filepath.Join(c.cfg.DataDir, historyFile)
	}
	idx, err := histindex.Open(ctx, path, c.cfg.Shards)
	if err != nil {
		return err
	}
	evt, err := c.js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		_ = idx.Close()
		return fmt.Errorf("history index: stream %s: %w", protocol.StreamEvents, err)
	}
	if idx.Rebuilt() {
		c.log.Warn("history index was of another schema version; rebuilding it from AX_EVT", "version", histindex.Version)
	}
	seq, err := idx.Cursor(ctx)
	if err != nil {
		_ = idx.Close()
		return err
	}
	if last := evt.CachedInfo().State.LastSeq; seq > last {
		// The stream is not the one the index was built from (recreated).
		c.log.Warn("history index is ahead of AX_EVT (the stream was recreated); rebuilding it", "cursor", seq, "last_seq", last)
		if err := idx.Reset(ctx); err != nil {
			_ = idx.Close()
			return err
		}
		seq = 0
	}
	c.hist = &history{c: c, idx: idx, evt: evt, applied: seq, wake: make(chan struct{}), flush: make(chan struct{}, 1)}
	c.goRun(c.hist.run)
	return nil
}

// run follows the stream until ctx ends, resuming after an error.
func (h *history) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := h.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		h.c.log.Warn("history: following AX_EVT stopped; resuming", "applied", h.appliedSeq(), "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// follow reads the stream from the sequence after the applied one and
// applies it in batches until an error or ctx ends.
func (h *history) follow(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if a := h.appliedSeq(); a > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, a+1
	}
	cons, err := h.c.js.OrderedConsumer(ctx, protocol.StreamEvents, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(historyBatch))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	if n, err := h.evt.Info(ctx); err == nil && n.State.LastSeq <= h.appliedSeq() {
		h.caught.Store(true)
	}
	msgs := make(chan jetstream.Msg, historyBatch)
	done := make(chan struct{})
	defer close(done)
	errc := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	held := histindex.NewHoldback()
	hold := h.c.cfg.historyHold
	expire := time.NewTicker(hold / 2)
	defer expire.Stop()
	batch := make([]histindex.Item, 0, historyBatch)
	last := h.appliedSeq() // the sequence of the last message read
	var (
		window       = h.c.mono() // the start of the current window
		windowRows   int          // rows applied in it
		sinceRelease int          // rows applied since the last release
	)
	for {
		batch = batch[:0]
		flushed, caught := false, false
		select {
		case m, ok := <-msgs:
			if !ok {
				return <-errc
			}
			var pending uint64
			last, pending = h.decode(m, &batch)
			// Gather for up to historyLinger, or until a reader asks for a
			// commit: a commit per message would cost more than the rows
			// (the events of live traffic come one by one).
			linger := time.NewTimer(historyLinger)
			lingering, flush := linger.C, h.flush
		fill:
			for len(batch) < historyBatch && (pending > 0 || lingering != nil) {
				select {
				case m, ok := <-msgs:
					if !ok {
						break fill
					}
					last, pending = h.decode(m, &batch)
				case <-lingering:
					lingering, flush = nil, nil // nil channels: the select waits for messages only
				case <-flush:
					lingering, flush, flushed = nil, nil, true
				}
			}
			linger.Stop()
			caught = pending == 0
		case <-h.flush:
			flushed = true
		case <-expire.C:
			if now := h.c.mono(); now.Sub(window) >= h.c.cfg.historyIdleRelease {
				if sinceRelease > 0 && windowRows < historyQuietRows {
					sinceRelease = 0
					if err := h.idx.ReleaseMemory(ctx); err != nil {
						h.c.log.Debug("history index: page cache not released", "err", err)
					} else if h.c.hooks.historyReleased != nil {
						h.c.hooks.historyReleased()
					}
				}
				window, windowRows = now, 0
			}
			if held.Len() == 0 {
				continue
			}
		}
		now := h.c.mono()
		batch = held.Split(batch, now, h.c.now().Add(hold+historyQuietMargin))
		if flushed {
			batch = held.All(batch)
		} else {
			batch = held.Due(batch, now.Add(-hold), historyHeldMax)
		}
		if cursor := held.Cursor(last); len(batch) > 0 || cursor > h.appliedSeq() {
			if err := h.idx.Apply(ctx, batch, cursor); err != nil {
				return err
			}
			h.advance(cursor)
			windowRows += len(batch)
			sinceRelease += len(batch)
		}
		if caught {
			h.caught.Store(true)
		}
	}
}

// decode appends the history item of one message to batch and returns its
// stream sequence and how many messages follow it in the stream.
func (h *history) decode(m jetstream.Msg, batch *[]histindex.Item) (seq, pending uint64) {
	if md, err := m.Metadata(); err == nil {
		seq, pending = md.Sequence.Stream, md.NumPending
	}
	if protocol.IsJobRetiredSubject(m.Subject()) {
		r, err := protocol.DecodeJobRetired(m.Data())
		if err != nil {
			h.c.log.Warn("history: bad job retirement skipped", "subject", m.Subject(), "seq", seq, "err", err)
			return seq, pending
		}
		*batch = append(*batch, histindex.Item{Job: &r, Seq: seq})
		return seq, pending
	}
	if e, ok := h.c.evMemo.take(eventID(m.Headers()), m.Data()); ok {
		*batch = append(*batch, histindex.Item{Exec: e, Seq: seq}) // this replica's own event, as published
		return seq, pending
	}
	// Not protocol.DecodeEvent: its strict checks cost more than the row,
	// and only the controllers publish on ax.evt (the fields the index
	// keys on are checked here).
	var ev protocol.Event
	if err := storedjson.Unmarshal(m.Data(), &ev); err != nil || ev.ExecID == "" || ev.JobID == "" || !ev.To.Valid() {
		h.c.log.Warn("history: bad event skipped", "subject", m.Subject(), "seq", seq, "err", err)
		return seq, pending
	}
	*batch = append(*batch, histindex.Item{Exec: snapshotOf(ev), Seq: seq})
	return seq, pending
}

// snapshotOf returns the execution an event carries; for an event without
// a snapshot (an older controller's), what its fields say.
func snapshotOf(ev protocol.Event) *protocol.Execution {
	if ev.Execution != nil {
		e := *ev.Execution
		e.Result = ev.Result
		return &e
	}
	_, sched, _ := protocol.ParseExecID("exec_id", ev.ExecID)
	return &protocol.Execution{ExecID: ev.ExecID, JobID: ev.JobID, Attempt: ev.Attempt, State: ev.To, Agent: ev.Agent,
		ScheduledAt: sched, UpdatedAt: ev.At, NextAttemptAt: ev.NextAttemptAt, Outcome: ev.Outcome, Result: ev.Result, Reason: ev.Reason}
}

func (h *history) appliedSeq() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.applied
}

func (h *history) advance(seq uint64) {
	h.mu.Lock()
	if seq > h.applied {
		h.applied = seq
	}
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

// waitFor waits until the index has applied the stream up to seq; false
// when ctx ended first.
func (h *history) waitFor(ctx context.Context, seq uint64) bool {
	for {
		h.mu.Lock()
		a, w := h.applied, h.wake
		h.mu.Unlock()
		if a >= seq {
			return true
		}
		select {
		case h.flush <- struct{}{}:
		default: // already asked
		}
		select {
		case <-w:
		case <-ctx.Done():
			return false
		}
	}
}

// catchUp waits, for at most historyReadWait, until the index has applied
// every event AX_EVT held when it was called. When the index is further
// behind, the read goes on with what it has (logged).
func (h *history) catchUp(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, h.c.cfg.historyReadWait)
	defer cancel()
	info, err := h.evt.Info(wctx)
	if err != nil {
		h.c.log.Warn("history: stream position unknown; reading the index as it is", "err", err)
		return
	}
	if !h.waitFor(wctx, info.State.LastSeq) && ctx.Err() == nil {
		h.c.log.Warn("history index behind AX_EVT; reading it as it is", "applied", h.appliedSeq(), "last_seq", info.State.LastSeq)
	}
}

// upToDate waits, for at most historyReadWait, until the index has
// applied every event AX_EVT held when it was called, and reports whether
// it has. Decisions that need every event (a job's executions all ended)
// wait for true.
func (h *history) upToDate(ctx context.Context) bool {
	wctx, cancel := context.WithTimeout(ctx, h.c.cfg.historyReadWait)
	defer cancel()
	info, err := h.evt.Info(wctx)
	if err != nil {
		return false
	}
	return h.waitFor(wctx, info.State.LastSeq)
}

func (h *history) close() {
	if err := h.idx.Close(); err != nil {
		h.c.log.Warn("close history index", "err", err)
	}
}

// inHistory reports whether execution id, which has no record in
// ax_execs, left live state (the history index holds it): its reports are
// then refused. An execution scheduled less than half the grace
// (liveGrace) ago cannot have, and is not looked up: it left live state
// the grace after its last change, which came after its agent fired it at
// its scheduled time by a clock within clock.max_skew (default 2s) of the
// controller's. An agent more than half the grace ahead (5 minutes with
// the default grace) could have a replay of a fire that left live state
// make its record again, as a copy of the same execution.
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
