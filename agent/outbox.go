package agent

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// maxWindows is how many published windows may wait for their PubAcks at
// once: the next window is read and published while the previous one's
// acknowledgements arrive.
const maxWindows = 2

// memWindows is how many windows of reports memOutbox holds at most; older
// ones are read back from SQLite (a long partition).
const memWindows = 8

// deleteWindows is how many windows of acknowledged rows may wait before
// they are deleted (one DELETE for all of them, a write of its own);
// whenever the flusher has nothing left to publish they are handed to the
// store's next commit instead (store.AckLater). A crash republishes them
// with their Msg-Ids (de-duplicated by the stream).
const deleteWindows = 4

// flusher publishes the outbox in order, in windows of Outbox.Window rows
// sent as async publishes with Nats-Msg-Id, and deletes a window only when
// every message of it has its PubAck. After an error it starts again from
// the first unacknowledged message with the same ids (the stream
// de-duplicates).
//
// Coalescing: a triggered or running report whose attempt has a later
// report in the same window is not sent; the later report carries the
// earlier steps' times (TriggeredAt, StartedAt) and the controller applies
// them in one write. Reports of one attempt are still published in order,
// and a slow attempt's steps are each sent as they happen, held back for
// up to outbox.hold waiting for the next one (outboxhold.go).
type flusher struct {
	a        *Agent
	l        *link
	mem      *memOutbox
	acked    int64 // highest seq acknowledged
	deleted  int64 // highest seq whose delete was submitted
	undel    int   // rows acknowledged and not deleted yet
	sent     int64 // highest seq published (≥ acked)
	inflight []pubWindow
	fails    int
	holds    *holds
	regGen   uint64 // l.regs when last seen
	// published counts messages sent, coalesced rows not sent and held
	// rows held back (outbox.hold).
	published, coalesced, held int64
}

type pubWindow struct {
	last int64 // highest seq read into the window (f.sent when none)
	rows int   // rows read into it
	rel  []*heldRow
	futs []jetstream.PubAckFuture
}

func newFlusher(a *Agent, l *link, mem *memOutbox) *flusher {
	return &flusher{a: a, l: l, mem: mem, holds: newHolds()}
}

func (f *flusher) run(ctx context.Context) {
	t := f.a.clk.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.a.outboxKick:
			f.linger(ctx)
		case <-t.C():
		}
		for {
			n, err := f.flushOnce(ctx)
			if err != nil {
				if f.fails == 0 || f.fails%100 == 0 {
					f.a.log.Warn("outbox flush failed; will retry", "err", err, "fails", f.fails+1)
				}
				f.fails++
				break
			}
			if f.fails > 0 {
				f.a.log.Info("outbox flushing again", "after_fails", f.fails)
				f.fails = 0
			}
			if n == 0 || ctx.Err() != nil {
				break
			}
		}
		f.ackLater()
		t.Reset(f.wait())
	}
}

// linger waits outbox.linger after new reports were written, so that the
// later steps of fast attempts join the window and their earlier reports
// are coalesced (one message per attempt instead of three).
func (f *flusher) linger(ctx context.Context) {
	d := f.a.cfg.Outbox.Linger
	if d <= 0 {
		return
	}
	t := f.a.clk.NewTimer(d)
	defer t.Stop()
	f.a.lingers.Add(1)
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// drain flushes until the outbox is empty, an error, or ctx ends; no
// report is held back any longer.
func (f *flusher) drain(ctx context.Context) {
	defer f.deleteAcked()
	f.holds.all = true
	f.holds.releaseAll(0)
	for ctx.Err() == nil {
		n, err := f.flushOnce(ctx)
		if err != nil || n == 0 {
			return
		}
	}
}

// deleteAcked deletes the acknowledged rows not deleted yet, in one write:
// those below the oldest held row (store.Tx.Ack deletes by seq).
func (f *flusher) deleteAcked() {
	if last, ok := f.toDelete(); ok {
		f.a.st.Submit(func(tx *store.Tx) error { return tx.Ack(last) }, nil)
	}
}

// ackLater has the same rows deleted by the store's next commit
// (store.AckLater) instead of a write of their own: at a few attempts a
// second, a write of its own was a fourth commit per attempt.
func (f *flusher) ackLater() {
	if last, ok := f.toDelete(); ok {
		f.a.st.AckLater(last)
	}
}

// toDelete returns the last row to delete (the last acknowledged one
// below the oldest held row) and whether it is past the rows already
// deleted, which it then counts as deleted.
func (f *flusher) toDelete() (int64, bool) {
	last := f.acked
	if seq, ok := f.holds.minSeq(); ok {
		last = min(last, seq-1)
	}
	if last <= f.deleted {
		return 0, false
	}
	f.deleted, f.undel = last, 0
	return last, true
}

var errLinkDown = errors.New("link down")

// reset forgets the windows in flight: the next flush starts again after
// the last acknowledged row.
func (f *flusher) reset() {
	f.inflight = f.inflight[:0]
	f.sent = f.acked
	f.holds.reset()
}

// flushOnce publishes the next window (while fewer than maxWindows wait)
// and waits for the oldest window's PubAcks; it returns how many rows were
// acknowledged (0: nothing to do).
func (f *flusher) flushOnce(ctx context.Context) (int, error) {
	js, up := f.l.ready()
	if !up || js == nil || !f.l.reg.Load() {
		f.reset()
		return 0, nil
	}
	if g := f.l.regs.Load(); g != f.regGen {
		// The link came back: what was written before goes at once.
		f.regGen = g
		f.holds.releaseAll(f.l.regSeq.Load())
	}
	for len(f.inflight) < maxWindows {
		w, err := f.publish(ctx, js)
		if err != nil {
			f.reset()
			return 0, err
		}
		if w.rows == 0 && len(w.rel) == 0 {
			break
		}
		f.inflight = append(f.inflight, w)
		f.sent = w.last
	}
	if len(f.inflight) == 0 {
		return 0, nil
	}
	w := f.inflight[0]
	if err := f.await(ctx, w); err != nil {
		f.reset()
		return 0, err
	}
	f.inflight = append(f.inflight[:0], f.inflight[1:]...)
	f.acked = w.last
	f.mem.acked(w.last)
	for _, r := range w.rel {
		f.holds.drop(r)
	}
	if f.undel += w.rows; f.undel >= deleteWindows*f.a.cfg.Outbox.Window {
		f.deleteAcked()
	}
	return w.rows + len(w.rel), nil
}

// publish takes the rows after f.sent — from memory, or from SQLite when
// memory does not hold them all (rows of an earlier run, a long
// partition) — and publishes them (coalesced), after the held rows whose
// hold ended; rows to hold are kept back (outboxhold.go).
func (f *flusher) publish(ctx context.Context, js jetstream.JetStream) (pubWindow, error) {
	msgs, fromMem := f.mem.after(f.sent, f.a.cfg.Outbox.Window)
	if !fromMem {
		var err error
		if msgs, err = f.a.st.Outbox(ctx, f.sent, f.a.cfg.Outbox.Window); err != nil {
			return pubWindow{}, err
		}
	}
	now := f.a.clk.Now()
	w := pubWindow{last: f.sent, rows: len(msgs)}
	release := func(r *heldRow) error {
		if err := f.send(js, &w, r.msg); err != nil {
			return err
		}
		r.inflight = true
		w.rel = append(w.rel, r)
		return nil
	}
	for _, r := range f.holds.rows {
		if !r.gone && !r.inflight && !now.Before(r.due) {
			if err := release(r); err != nil {
				return pubWindow{}, err
			}
		}
	}
	if len(msgs) == 0 {
		return w, nil
	}
	w.last = msgs[len(msgs)-1].Seq
	hold := f.a.cfg.Outbox.Hold
	skip := coalesce(msgs)
	for i, m := range msgs {
		if skip[i] {
			f.coalesced++
			continue
		}
		key, k, ok := splitMsgID(m.MsgID)
		kind := protocol.ReportKind(k)
		due := now.Add(hold)
		if r := f.holds.byKey[key]; ok && r != nil {
			switch {
			case r.msg.Seq >= m.Seq:
				// Held already, or superseded by the held row: read again
				// after a reset.
				continue
			case r.inflight:
			case supersedes(kind):
				f.holds.drop(r)
				f.coalesced++
				due = r.due // the attempt's first held step sets the end
			default:
				if err := release(r); err != nil { // before the attempt's next row
					return pubWindow{}, err
				}
			}
		}
		if ok && f.holds.holdable(m, kind, fromMem, hold) {
			f.holds.add(m, key, due)
			f.held++
			continue
		}
		if err := f.send(js, &w, m); err != nil {
			return pubWindow{}, err
		}
	}
	return w, nil
}

// send publishes m asynchronously with its Msg-Id into w.
func (f *flusher) send(js jetstream.JetStream, w *pubWindow, m store.OutboxMsg) error {
	nm := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{m.MsgID}}}
	fut, err := js.PublishMsgAsync(nm)
	if err != nil {
		return err
	}
	f.published++
	w.futs = append(w.futs, fut)
	return nil
}

// await waits for every PubAck of a window.
func (f *flusher) await(ctx context.Context, w pubWindow) error {
	timer := f.a.clk.NewTimer(5 * time.Second)
	defer timer.Stop()
	for _, fut := range w.futs {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return err
		case <-timer.C():
			return errors.New("timed out waiting for PubAcks")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// coalesce marks the rows not to send: a triggered or running report of
// an attempt that has a later report (running, finished, interrupted) in
// msgs. Those later reports carry the earlier steps' times.
func coalesce(msgs []store.OutboxMsg) []bool {
	skip := make([]bool, len(msgs))
	later := make(map[string]struct{}, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		key, kind, ok := splitMsgID(msgs[i].MsgID)
		if !ok {
			continue
		}
		switch protocol.ReportKind(kind) {
		case protocol.ReportTriggered, protocol.ReportRunning:
			if _, seen := later[key]; seen {
				skip[i] = true
			}
		}
		switch protocol.ReportKind(kind) {
		case protocol.ReportRunning, protocol.ReportFinished, protocol.ReportInterrupted:
			later[key] = struct{}{}
		}
	}
	return skip
}

// splitMsgID splits exec_id/attempt/kind into the attempt key and kind.
func splitMsgID(id string) (key, kind string, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", "", false
	}
	return id[:i], id[i+1:], true
}
