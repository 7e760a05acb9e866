package agent

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent/store"
)

// flusher publishes the outbox in order, in windows of Outbox.Window async
// publishes with Nats-Msg-Id, and deletes a window only when every message
// of it has its PubAck. After an error it starts again from the first
// unacknowledged message with the same ids (the stream de-duplicates).
type flusher struct {
	a     *Agent
	l     *link
	acked int64 // highest seq acknowledged
	fails int
}

func newFlusher(a *Agent, l *link) *flusher { return &flusher{a: a, l: l} }

func (f *flusher) run(ctx context.Context) {
	t := f.a.clk.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.a.outboxKick:
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
		t.Reset(time.Second)
	}
}

// drain flushes until the outbox is empty, an error, or ctx ends.
func (f *flusher) drain(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := f.flushOnce(ctx)
		if err != nil || n == 0 {
			return
		}
	}
}

var errLinkDown = errors.New("link down")

// flushOnce publishes one window; it returns how many were acknowledged.
func (f *flusher) flushOnce(ctx context.Context) (int, error) {
	js, up := f.l.ready()
	if !up || js == nil || !f.l.reg.Load() {
		return 0, nil
	}
	msgs, err := f.a.st.Outbox(ctx, f.acked, f.a.cfg.Outbox.Window)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		nm := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
		nm.Header.Set(jetstream.MsgIDHeader, m.MsgID)
		fut, err := js.PublishMsgAsync(nm)
		if err != nil {
			return 0, err
		}
		futs = append(futs, fut)
	}
	timer := f.a.clk.NewTimer(5 * time.Second)
	defer timer.Stop()
	for _, fut := range futs {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return 0, err
		case <-timer.C():
			return 0, errors.New("timed out waiting for PubAcks")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	last := msgs[len(msgs)-1].Seq
	f.acked = last
	f.a.st.Submit(func(tx *store.Tx) error { return tx.Ack(last) }, nil)
	return len(msgs), nil
}
