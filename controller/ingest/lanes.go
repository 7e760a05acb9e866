package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/pkg/protocol"
)

// laneBatch bounds the report messages a lane applies together.
const laneBatch = 256

// lane applies the reports given to it, in order per execution; it alone
// owns its cache. It works in batches: it takes the messages waiting
// (up to laneBatch), folds the reports of one execution into one record
// write (execution.Apply per report), issues the writes of all
// executions at once through the execution store (execstore.Store.PutAsync:
// pipelined compare-and-set on the KV revision), publishes the events of
// the writes that succeeded (a report's once those of the reports before
// it in its execution are stored: storeEvents), and acknowledges each
// message only after its write and its events are stored (one behind:
// ackkeep.go). A lost compare-and-set or a failed write is redone for that
// execution alone, reading the record again.
// Reports that only move an execution of a one-shot job to TRIGGERED or
// RUNNING wait up to reportLinger for its later reports, so that a fast
// attempt is one write (lanelinger.go).
//
// Its cache may be stale: other code writes ax_execs too (the lease code,
// retries, an operator's retry or cancel on any replica), through the
// store but not through this lane. A stale record cannot be written over
// (compare-and-set), but it can make a report look refused without a
// write; so a refusal a newer record may change (ahead of the record, or
// for another agent) reads the record again (mayBeStale).
type lane struct {
	w     *shardWorker
	in    chan jetstream.Msg
	cache map[string]execstore.Version // exec id → last record this lane read or wrote

	// per batch, reused
	groups []*group
	index  map[string]*group

	// lingering are the reports held back for the later reports of their
	// execution (lanelinger.go), in the order they came.
	lingering []*pendingReport
}

// pendingReport is one report message of a batch and what became of it.
type pendingReport struct {
	msg      jetstream.Msg
	until    time.Time // end of its wait for the later reports (lanelinger.go)
	r        protocol.Report
	mayDefer bool
	// The outcome of execution.Apply in the current plan: the effects of
	// the report (accepted) or its refusal (err, with the effects of a
	// duplicate: its events again).
	effs []execution.Effect
	err  error
	held bool // ahead of its record in the current plan
	// due: effs are to be started (commit); evs: the events of effs
	// published and not known stored (storeEvents); evErr: one could not
	// be sent at all.
	due   bool
	evs   []jetstream.PubAckFuture
	evErr bool
	// create authorizes the report to create its execution's record
	// (AuthorizeCreate, asked at most once).
	create     func() error
	createDone bool
	createErr  error
}

// group is the reports of one execution in a batch, in stream order, and
// the write they make.
type group struct {
	id    string
	items []*pendingReport
	cur   execstore.Version
	next  *execution.Record  // the record to write; nil when nothing applies
	put   *execstore.Pending // its write in flight
	err   error
	rev   uint64
	sent  int // items whose effects storeEvents started
}

func newLane(w *shardWorker) *lane {
	return &lane{w: w, in: make(chan jetstream.Msg, laneBatch), cache: map[string]execstore.Version{}, index: map[string]*group{}}
}

func (l *lane) run(ctx context.Context) {
	batch := make([]jetstream.Msg, 0, laneBatch)
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	for {
		var wake <-chan time.Time
		if at, ok := l.lingerDue(); ok {
			due.Reset(at.Sub(l.w.c.mono()))
			wake = due.C
		}
		batch = batch[:0]
		closed := false
		select {
		case msg, ok := <-l.in:
			if closed = !ok; ok {
				batch = append(batch, msg)
			}
		case <-wake:
		}
	fill:
		for !closed && len(batch) < laneBatch {
			select {
			case m, ok := <-l.in:
				if closed = !ok; closed {
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if ctx.Err() != nil {
			// drain: unacknowledged messages (held back ones too) are redelivered
			l.lingering = l.lingering[:0]
			if closed {
				return
			}
			continue
		}
		if len(batch) > 0 || len(l.lingering) > 0 {
			l.handleBatch(ctx, batch, closed)
		}
		if closed {
			return
		}
	}
}

// handleBatch applies a batch of report messages (see lane), after those
// held back by the batches before (lanelinger.go). With flush (the lane
// is closing) nothing is held back.
func (l *lane) handleBatch(ctx context.Context, msgs []jetstream.Msg, flush bool) {
	c := l.w.c
	l.groups = l.groups[:0]
	clear(l.index)
	now := l.w.c.mono()
	// The reports held back come first (stream order per execution), as
	// they were decoded and checked.
	for _, p := range l.lingering {
		l.addTo(p)
	}
	l.lingering = l.lingering[:0]
	for _, m := range msgs {
		r, err := c.decode.Report(m.Data())
		if err != nil {
			c.reject(RejectInvalid)
			c.log.Warn("report rejected", "reason", RejectInvalid, "subject", m.Subject(), "err", err)
			_ = m.Ack()
			continue
		}
		// Permissions let an agent publish only on ax.rpt.*.<itself>; the
		// body must name the same agent, so no agent reports as another.
		subj := m.Subject()
		if subj[strings.LastIndexByte(subj, '.')+1:] != r.Agent {
			l.reject(m, r, RejectWrongAgent, "the subject names another agent than the report")
			continue
		}
		// The other checks of reportauth.go: the shard, the epoch's holder.
		if tok, ok := c.ShardOK(subj, r.JobID); !ok {
			l.reject(m, r, RejectBadShard, fmt.Sprintf("shard token %d of %s is not the shard of job %s", tok, subj, r.JobID))
			continue
		}
		if r.Epoch > 0 {
			if reason, detail := c.AuthorizeEpoch(ctx, r); reason != "" {
				l.reject(m, r, reason, detail)
				continue
			}
		}
		p := &pendingReport{msg: m, until: now.Add(reportLinger), r: r, mayDefer: l.mayDefer(m)}
		p.create = func() error {
			if !p.createDone {
				p.createDone = true
				if reason, detail, early, st := c.authorizeCreate(ctx, p.r); reason != "" {
					p.createErr = &execution.Rejection{Err: rejectReason(reason), Detail: detail, Early: early}
					if st != nil {
						c.unassignStray(ctx, p.r, *st)
					}
				}
			}
			return p.createErr
		}
		l.addTo(p)
	}
	l.holdBack(now, flush)
	// Plan every execution and issue its write.
	for _, g := range l.groups {
		cur, ok := l.cache[g.id]
		if !ok {
			cur, ok = c.created.take(g.id) // written by CreateJob just before
		}
		guessed := !ok && l.guessAbsent(g.items[0].r)
		if !ok && !guessed {
			if cur, g.err = c.execs.Get(ctx, g.id); g.err != nil {
				continue
			}
		}
		if l.plan(ctx, g, cur); g.err != nil {
			continue
		}
		if ok && l.mayBeStale(g) {
			// Ahead of the cached record, or for another agent than it
			// names: it may be stale (written outside this lane: the
			// controller's settleEpochs, a retry sent, an operator's
			// retry or cancel). Read.
			read, err := c.execs.Get(ctx, g.id)
			if g.err = err; err != nil {
				continue
			}
			if read.Rec != nil || cur.Rev != 0 { // else a created record not stored yet (held): it stands
				cur = read
				if l.plan(ctx, g, cur); g.err != nil {
					continue
				}
			}
		}
		if guessed && g.next == nil { // the guess decided nothing: read for real
			if cur, g.err = c.execs.Get(ctx, g.id); g.err != nil {
				continue
			}
			if l.plan(ctx, g, cur); g.err != nil {
				continue
			}
		}
		if g.next != nil {
			g.put = c.execs.PutAsync(g.cur, g.next)
		}
	}
	// Collect the writes; redo the failed ones one by one.
	for _, g := range l.groups {
		if g.put != nil {
			if g.rev, g.err = g.put.Wait(ctx); ctx.Err() != nil {
				return // shutting down: nothing acknowledged is redelivered
			}
		}
		if g.err != nil && !l.settle(ctx, g) {
			return
		}
		l.commit(g)
	}
	// Acknowledge once the events are stored too.
	if !l.storeEvents(ctx) {
		return // shutting down: nothing acknowledged is redelivered
	}
	for _, g := range l.groups {
		l.finish(g)
	}
}

// guessAbsent reports whether the execution of r very likely has no record
// yet: the first report of a periodic fire. The write is then tried as a
// create without reading first; a conflict falls back to reading.
func (l *lane) guessAbsent(r protocol.Report) bool {
	first := r.Kind == protocol.ReportTriggered || !r.TriggeredAt.IsZero()
	if !first || r.Attempt != 1 {
		return false
	}
	b, ok := l.w.c.jobs.Brief(r.JobID)
	return ok && b.Periodic
}

// plan applies the group's reports, in order, to cur. A report ahead of
// the record is held and tried again after the others, so that reports of
// one execution that arrive out of order in one batch still apply. When
// the job's Env cannot be had (a read of a job the cache had not seen
// failed), g.err says so and nothing is planned: the group is settled
// later.
func (l *lane) plan(ctx context.Context, g *group, cur execstore.Version) {
	c := l.w.c
	g.cur, g.next, g.err = cur, nil, nil
	rec := cur.Rec
	for _, p := range g.items {
		p.held, p.effs, p.err, p.due = false, nil, nil, false
	}
	var env execution.Env
	if len(g.items) > 0 {
		if env, g.err = c.host.JobEnv(ctx, g.items[0].r.JobID); g.err != nil {
			return
		}
	}
	now := env.Now
	if rec == nil && len(g.items) > 0 {
		// No record: an execution that left live state (the
		// controller's retention; Host.InHistory) is never made again
		// by a late or replayed report.
		if e, ok := c.host.InHistory(context.Background(), g.id); ok {
			for _, p := range g.items {
				p.effs, p.err = nil, &execution.Rejection{Err: execution.ErrDuplicate, Detail: fmt.Sprintf(
					"execution left live state %s ago as %s; its history is final", now.Sub(e.UpdatedAt).Round(time.Second), e.State)}
			}
			return
		}
	}
	for pass := 0; ; pass++ {
		progress := false
		for _, p := range g.items {
			if pass > 0 && !p.held {
				continue
			}
			env.AuthorizeCreate = p.create
			next, effs, err := execution.Apply(rec, execution.Report{Report: p.r}, env)
			p.effs, p.err, p.held = effs, err, execution.IsEarly(err)
			if err == nil {
				rec, g.next, progress = next, next, true
			}
		}
		if !progress || !l.anyHeld(g) {
			return
		}
	}
}

// mayBeStale reports whether a report of the group was refused in a way a
// newer record may change: held (ahead of it) or for another agent.
func (l *lane) mayBeStale(g *group) bool {
	for _, p := range g.items {
		if p.held || errors.Is(p.err, execution.ErrWrongAgent) {
			return true
		}
	}
	return false
}

// reject counts, logs and acknowledges a report refused before its record
// is read.
func (l *lane) reject(m jetstream.Msg, r protocol.Report, reason, detail string) {
	c := l.w.c
	c.reject(reason)
	c.log.Warn("report rejected", "reason", reason, "detail", detail, "subject", m.Subject(), "agent", r.Agent,
		"exec", r.ExecID, "attempt", r.Attempt, "kind", r.Kind, "epoch", r.Epoch)
	_ = m.Ack()
}

func (l *lane) anyHeld(g *group) bool {
	for _, p := range g.items {
		if p.held {
			return true
		}
	}
	return false
}

// settle redoes a group whose write failed: read, plan, write, one at a
// time, until it is stored or ctx ends (false). A transient failure (KV
// unreachable) is retried in place, keeping the messages in progress, so
// that the reports behind them are never applied out of order.
func (l *lane) settle(ctx context.Context, g *group) bool {
	c := l.w.c
	backoff := 50 * time.Millisecond
	conflicts := 0
	for {
		delete(l.cache, g.id)
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(g.err, execstore.ErrCASConflict) && conflicts < 20 {
			conflicts++
		} else {
			c.log.Warn("reports not applied yet, retrying", "exec", g.id, "reports", len(g.items), "err", g.err, "in", backoff)
			if !holdOn(ctx, &backoff, g) {
				return false
			}
			conflicts = 0
		}
		cur, err := c.execs.Get(ctx, g.id)
		if err != nil {
			g.err = err
			continue
		}
		if l.plan(ctx, g, cur); g.err != nil {
			continue // the job could not be read: not decided from defaults
		}
		if g.next == nil {
			return true
		}
		if g.rev, g.err = c.execs.Put(ctx, cur, g.next); g.err == nil {
			return true
		}
	}
}

// commit does what follows a stored group: cache, metrics, logs; it marks
// the reports whose effects storeEvents starts (events, retry timers;
// a duplicate re-publishes its events). Rejected reports are counted and
// logged.
func (l *lane) commit(g *group) {
	c := l.w.c
	if g.next != nil {
		l.remember(g.id, execstore.Version{Rec: g.next, Rev: g.rev})
	} else {
		l.remember(g.id, g.cur)
	}
	for _, p := range g.items {
		switch {
		case p.err == nil:
			for _, e := range p.effs {
				if _, ok := e.(execution.Transitioned); ok {
					c.apply()
				}
			}
		case p.held && p.mayDefer:
			continue // deferred in finish
		default:
			reason := rejectLabel(p.err)
			c.reject(reason)
			c.log.Info("report rejected", "reason", reason, "detail", execution.DetailOf(p.err), "exec", p.r.ExecID,
				"attempt", p.r.Attempt, "kind", p.r.Kind, "agent", p.r.Agent)
		}
		// Report effects are events and retry timers, never commands;
		// storeEvents starts them.
		p.due = true
	}
}

// finish acknowledges the group's messages, their writes and events
// stored; a deferred report is redelivered later.
func (l *lane) finish(g *group) {
	c := l.w.c
	for _, p := range g.items {
		switch {
		case p.held && p.mayDefer:
			delay := deferDelay(p.msg)
			c.m.Deferred.Inc()
			c.log.Info("report ahead of its execution, deferred", "exec", p.r.ExecID, "attempt", p.r.Attempt, "kind", p.r.Kind, "in", delay)
			_ = p.msg.NakWithDelay(delay)
		default:
			c.acks.ack(p.msg)
		}
	}
	g.items = nil
}

// mayDefer reports whether a report that is ahead of its record may still
// wait for the missing earlier reports: while it is younger than three ack
// waits (a crashed controller's unacknowledged reports come back after one)
// and at least a minute.
func (l *lane) mayDefer(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil {
		return false
	}
	return time.Since(md.Timestamp) < max(3*l.w.c.cfg.AckWait, time.Minute)
}

// deferDelay grows with the number of deliveries: 250ms, 500ms, ... 8s.
func deferDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = max(md.NumDelivered, 1)
	}
	return min(250*time.Millisecond<<min(n-1, 5), 8*time.Second)
}

// remember caches a record for the next report of the same execution;
// terminal records are dropped (later reports for them are rare).
func (l *lane) remember(id string, v execstore.Version) {
	if v.Rec == nil || v.Rec.State.Terminal() {
		delete(l.cache, id)
		return
	}
	if len(l.cache) >= shardCacheMax {
		clear(l.cache)
	}
	l.cache[id] = v
}
