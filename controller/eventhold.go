package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
// controller and agent together on the dispatch benchmark (bench/README,
// stop 32). An execution still PENDING two ticks later (a delayed
// one-shot, an agent offline) gets its event then.
//
// What a reader of the history may rely on stays true:
//
//   - A list (ListExecutions) publishes every held event and waits for
//     their acks before it reads the index, so a create is seen by the next
//     list (read your writes).
//   - The create's write op (writemark) stays open until its held event is
//     published or superseded: a controller killed meanwhile leaves its
//     mark before the record, so the reload of the shard finds the record
//     without its event and publishes it (historyrepair.go).
//   - A clean stop publishes what is held.
//
// On a replica whose reports for the execution's shard are applied by
// another replica, the event is published after the hold even when the
// execution moved on meanwhile: the history index keeps the newest
// snapshot, and a subscriber of AX_EVT may see the PENDING event after a
// later one of the same execution.
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
// transition, when it was held (eventHold.gen) and the release of the
// write op that waits for it.
type heldEvent struct {
	rec     *execRecord
	tr      transition
	gen     uint64
	release func(ok bool)
}

// hold keeps the event of rec's transition tr; release is called once it
// is stored (true), superseded (true) or could not be sent (false).
func (h *eventHold) hold(rec *execRecord, tr transition, release func(ok bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string]heldEvent{}
	}
	if old, ok := h.held[rec.ExecID]; ok {
		old.release(true) // the newer one says the same, later
	}
	h.held[rec.ExecID] = heldEvent{rec: rec, tr: tr, gen: h.gen, release: release}
	h.n.Store(int64(len(h.held)))
}

// supersede drops the held event of execID: an event of a later change of
// the execution is being published.
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
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []heldEvent
	for id, e := range h.held {
		if all || h.gen-e.gen >= 2 {
			out = append(out, e)
			delete(h.held, id)
		}
	}
	h.n.Store(int64(len(h.held)))
	return out
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
	es := c.evHold.take(all)
	if len(es) == 0 {
		return
	}
	futs := make([]jetstream.PubAckFuture, len(es))
	for i, e := range es {
		futs[i] = c.publishEvent(e.rec, e.tr)
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.eventAckWait)
	defer cancel()
	for i, e := range es {
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
