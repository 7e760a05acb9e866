package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/pkg/protocol"
)

// heldTick is how often the held PENDING events are looked at; one is
// published two ticks after it was held (0.5–1 s), unless its execution
// moved on before.
const heldTick = 500 * time.Millisecond

// eventHold keeps the PENDING events of the executions a one-shot create
// made (createOneShot) for about a second before they are published.
//
// Most such executions move on within that second: their agent runs them
// at once and reports, and the event of that report (from PENDING, via
// TRIGGERED and RUNNING, to SUCCESS) says all the PENDING event would
// have. The held event is then dropped (supersede, called by publishEvent),
// which saves one stored message, its acknowledgement and the history
// follower's read of it per dispatched execution: about 9 % of the CPU of
// controller and agent together on the dispatch benchmark (bench/JOURNAL.md,
// stop 32). An execution still PENDING two ticks later (a delayed
// one-shot, an agent offline) gets its event then.
//
// For a pinned one-shot job due at once the record itself is held with its
// event (unstored, createheld.go): the first report's lane creates it, and
// one still held two ticks later is stored (a create: compare-and-set on no
// record) before its event is published; a read of it stores it first
// (storeHeldRecord), and so does everything that publishes what is held.
//
// What a reader of the history may rely on stays true:
//
//   - A list (ListExecutions) publishes every held event (and stores
//     every held record) and waits for their acks before it reads the
//     index, so a create is seen by the next list (read your writes); so
//     do a reload (before its scan) and a store loss's re-send of runs.
//   - The create's write op (writemark) stays open until its held event is
//     published or superseded: a controller killed meanwhile leaves its
//     mark before the record, so the reload of the shard finds the record
//     without its event and publishes it (historyrepair.go).
//   - A clean stop publishes what is held.
//   - A replica that stops working a shard (a hand-over, a lease lost)
//     publishes the shard's held events before it releases the lease
//     (publishHeldOfShard, from ForgetShard), so that the next owner's
//     events of those executions come after them. An event held for a
//     shard this replica may no longer work by the time it is published
//     (a create racing the hand-over, a lease lost while the process was
//     frozen) is published only while its record is still PENDING
//     (movedOn): else the other replica's event, from PENDING, is stored
//     already and says more.
//
// Safe for concurrent use: mu guards the map and the tick count; flushMu
// makes one publishHeld at a time, so that a list's publishHeld returns
// only once the events another call (the loop, another list) took before
// it are stored too.
type eventHold struct {
	mu      sync.Mutex
	held    map[string]heldEvent
	gen     uint64       // ticks so far (heldLoop)
	n       atomic.Int64 // len(held), read without the lock by supersede
	flushMu sync.Mutex   // held through a publishHeld
}

// heldEvent is one held PENDING event: the record it describes, its
// transition, when it was held (eventHold.gen), whether the record itself
// is held too (unstored: not in ax_execs yet, createheld.go) and the
// release of the write op that waits for it.
type heldEvent struct {
	rec      *execRecord
	tr       transition
	gen      uint64
	unstored bool
	release  func(ok bool)
}

// hold keeps the event of rec's transition tr, and rec itself when
// unstored; release is called once it is stored (true), superseded (true)
// or could not be sent (false).
func (h *eventHold) hold(rec *execRecord, tr transition, unstored bool, release func(ok bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string]heldEvent{}
	}
	if old, ok := h.held[rec.ExecID]; ok {
		old.release(true) // the newer one says the same, later
	}
	h.held[rec.ExecID] = heldEvent{rec: rec, tr: tr, gen: h.gen, unstored: unstored, release: release}
	h.n.Store(int64(len(h.held)))
}

// supersede drops the held event of execID: an event of a later change of
// the execution is being published (after that change was stored, so a
// record held unstored is in ax_execs by then).
func (h *eventHold) supersede(execID string) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	e, ok := h.held[execID]
	if ok {
		delete(h.held, execID)
		h.n.Store(int64(len(h.held)))
	}
	h.mu.Unlock()
	if ok {
		e.release(true)
	}
}

// take removes and returns the held events: all of them, or those held
// at least two ticks ago.
func (h *eventHold) take(all bool) []heldEvent {
	return h.takeWhere(func(e heldEvent) bool { return all || h.gen-e.gen >= 2 })
}

// takeWhere removes and returns the held events pick chooses; pick is
// called with mu held.
func (h *eventHold) takeWhere(pick func(heldEvent) bool) []heldEvent {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []heldEvent
	for id, e := range h.held {
		if pick(e) {
			out = append(out, e)
			delete(h.held, id)
		}
	}
	h.drained()
	return out
}

// drained records len(held) after entries were removed, and lets go of an
// empty map: a Go map keeps the buckets of its largest size, and a burst
// of creates grows this one to a second's worth of them (3.4 MB after
// 300,000 creates), kept for the process's life otherwise. hold makes a
// new one. Called with mu held, by take: at most once a tick, so that a
// map that empties often under load is not made again each time.
func (h *eventHold) drained() {
	if len(h.held) == 0 {
		h.held = nil
	}
	h.n.Store(int64(len(h.held)))
}

// requeue holds e again, due two ticks from now: its record could not be
// stored (the store refused it or did not answer), and it is tried again
// until it is stored or a later event of the execution supersedes it. Its
// write op stays open meanwhile.
func (h *eventHold) requeue(e heldEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string]heldEvent{}
	}
	if _, ok := h.held[e.rec.ExecID]; ok {
		e.release(true) // held again since: the newer one stands
		return
	}
	e.gen = h.gen
	h.held[e.rec.ExecID] = e
	h.n.Store(int64(len(h.held)))
}

// takeUnstored removes and returns the held event of execID if its record
// is held unstored.
func (h *eventHold) takeUnstored(execID string) (heldEvent, bool) {
	if h.n.Load() == 0 {
		return heldEvent{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.held[execID]
	if !ok || !e.unstored {
		return heldEvent{}, false
	}
	delete(h.held, execID)
	h.n.Store(int64(len(h.held)))
	return e, true
}

// peekUnstored returns the record of execID if the hold keeps it unstored,
// leaving it held. The record is the hold's: the caller only reads it.
func (h *eventHold) peekUnstored(execID string) (*execRecord, bool) {
	if h.n.Load() == 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.held[execID]
	if !ok || !e.unstored {
		return nil, false
	}
	return e.rec, true
}

// waitFlush returns once no publishHeld or storeHeldRecord is under way.
func (h *eventHold) waitFlush() {
	h.flushMu.Lock()
	h.flushMu.Unlock() // empty: only waits for the holder
}

// tick advances the hold's clock by one heldTick.
func (h *eventHold) tick() {
	h.mu.Lock()
	h.gen++
	h.mu.Unlock()
}

// publishHeld publishes the held events (all, or those due) and waits for
// their acks (eventAckWait), releasing each event's write op. It waits
// first for a publishHeld under way: an event taken by it is no longer
// held, yet may not be stored.
func (c *execService) publishHeld(ctx context.Context, all bool) {
	c.evHold.flushMu.Lock()
	defer c.evHold.flushMu.Unlock()
	c.flushHeld(ctx, c.evHold.take(all), false)
}

// publishHeldOfShard publishes at once the held events of the executions
// of shard n, which this replica stops working (ForgetShard, called before
// its lease is released): the next owner applies their reports, and the
// events of those must be stored after the PENDING ones.
func (c *execService) publishHeldOfShard(ctx context.Context, n int) {
	if c.evHold.n.Load() == 0 {
		return
	}
	c.evHold.flushMu.Lock()
	defer c.evHold.flushMu.Unlock()
	c.flushHeld(ctx, c.evHold.takeWhere(func(e heldEvent) bool { return c.own.ShardOf(e.rec.JobID) == n }), true)
}

// storeHeldRecord stores the record of execID and publishes its event when
// the hold keeps the record unstored (createheld.go), so that a read of
// ax_execs made next finds it. Like publishHeld, it waits for a
// publishHeld under way, which may have taken the record.
func (c *execService) storeHeldRecord(ctx context.Context, execID string) {
	if c.evHold.n.Load() == 0 {
		return
	}
	c.evHold.flushMu.Lock()
	defer c.evHold.flushMu.Unlock()
	if e, ok := c.evHold.takeUnstored(execID); ok {
		c.flushHeld(ctx, []heldEvent{e}, false)
	}
}

// flushHeld stores the records of es held unstored (all in flight
// together, each a create: compare-and-set on no record) and then
// publishes the events, waiting for the acks (eventAckWait) and releasing
// each one's write op. A record found stored already was written by the
// lane of the execution's first report, whose event says more than
// PENDING: that one is released without its event. A record the store
// did not take is held again (requeue). The event of a stored record is
// published only while the record is still at the create's step when
// another replica may have applied its reports (movedOn; always with
// leaving, the shard's hand-over): else their event, from PENDING, is
// stored already and says more. One whose record could not be read is
// held again, as a record not stored is: published blind, it might land
// after theirs. The caller holds flushMu.
func (c *execService) flushHeld(ctx context.Context, es []heldEvent, leaving bool) {
	if len(es) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.eventAckWait)
	defer cancel()
	var puts []*execstore.Pending
	for i, e := range es {
		if e.unstored {
			if puts == nil {
				puts = make([]*execstore.Pending, len(es))
			}
			puts[i] = c.execs().PutAsync(execstore.Version{}, e.rec)
		}
	}
	futs := make([]jetstream.PubAckFuture, len(es))
	sent := make([]bool, len(es))
	for i, e := range es {
		if puts != nil && puts[i] != nil {
			rev, err := puts[i].Wait(wctx)
			switch {
			case errors.Is(err, execstore.ErrCASConflict):
				e.release(true) // stored by its first report's lane: its event says more
				continue
			case err != nil:
				c.log.Warn("store held execution record; held to try again", "exec", e.rec.ExecID, "err", err)
				c.evHold.requeue(e)
				continue
			}
			c.ingest.NoteCreated(execstore.Version{Rec: e.rec, Rev: rev})
		} else if moved, err := c.movedOn(wctx, e.rec, leaving); err != nil {
			c.log.Warn("read held event's execution record; held to try again", "exec", e.rec.ExecID, "err", err)
			c.evHold.requeue(e)
			continue
		} else if moved {
			e.release(true)
			continue
		}
		futs[i], sent[i] = c.publishEvent(e.rec, e.tr), true
	}
	for i, e := range es {
		if !sent[i] {
			continue
		}
		ok := futs[i] != nil
		if ok {
			select {
			case <-futs[i].Ok():
			case err := <-futs[i].Err():
				c.log.Warn("publish event", "exec", e.rec.ExecID, "to", e.tr.to, "err", err)
				ok = false
			case <-wctx.Done():
				ok = false
			}
		}
		e.release(ok)
	}
}

// movedOn reports whether the stored record of a held event's rec has
// moved past the create's step (or is gone). It reads the record unless
// this replica surely works its shard (its lease renewed in time, and not
// leaving it): then its reports are applied here, and would have
// superseded the event. A replica that was frozen past its lease may still
// think it works the shard while another one applies its reports
// (OwnsJobSurely).
func (c *execService) movedOn(ctx context.Context, rec *execRecord, leaving bool) (bool, error) {
	if !leaving && c.own.OwnsJobSurely(rec.JobID) {
		return false, nil
	}
	cur, err := c.execs().Get(ctx, rec.ExecID)
	if err != nil {
		return false, err
	}
	return cur.Rec == nil || cur.Rec.State != rec.State || cur.Rec.Attempt != rec.Attempt, nil
}

// heldLoop publishes the held PENDING events that are due, every heldTick,
// until ctx ends.
func (c *execService) heldLoop(ctx context.Context) {
	c.every(ctx, c.cfg.heldTick, c.cfg.heldTick, "publish held events", func(ctx context.Context) error {
		c.evHold.tick()
		c.publishHeld(ctx, false)
		return nil
	})
}

// holdsPending reports whether the event of tr is one the hold takes: a
// create's PENDING event.
func holdsPending(tr transition) bool {
	return tr.from == "" && tr.to == protocol.StatePending && len(tr.via) == 0
}
