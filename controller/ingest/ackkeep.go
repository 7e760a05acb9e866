package ingest

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ackHoldMax bounds how long the ack keeper holds an applied report's
// acknowledgement when no other report is applied (newAckKeeper takes the
// smaller of it and a quarter of the ack wait).
const ackHoldMax = 250 * time.Millisecond

// ackKeeper acknowledges applied reports one behind: it holds the
// acknowledgement of the report applied last and sends it when the next
// one is applied, when none comes for its hold, or when a shard worker
// stops (flush).
//
// Why: AX_RPT is a work queue, so an acknowledged report is removed, and
// the embedded server's file store replaces its last block by a new file
// whenever a removal leaves that block empty (removeMsgBlock: a new block,
// a tombstone, the old file unlinked). Below a few hundred reports a
// second every report was applied before the next arrived, so each one
// emptied the stream and cost a block file; at 400 executions a second
// that was 9 % of the controller's CPU. The report held back is the newest
// applied, so the last block keeps a message while reports keep coming.
//
// It changes what a crash redelivers by at most that one report, which
// the lanes apply once (a duplicate step). Safe for use by many lanes.
type ackKeeper struct {
	hold time.Duration

	mu    sync.Mutex
	held  jetstream.Msg
	timer *time.Timer // acks held after hold without another ack
}

func newAckKeeper(ackWait time.Duration) *ackKeeper {
	k := &ackKeeper{hold: min(ackHoldMax, max(ackWait/4, time.Millisecond))}
	k.timer = time.AfterFunc(time.Hour, k.flush)
	k.timer.Stop()
	return k
}

// ack acknowledges the report held so far and holds m's acknowledgement.
func (k *ackKeeper) ack(m jetstream.Msg) {
	k.mu.Lock()
	prev := k.held
	k.held = m
	k.timer.Reset(k.hold)
	k.mu.Unlock()
	if prev != nil {
		_ = prev.Ack()
	}
}

// flush acknowledges the report held, if any.
func (k *ackKeeper) flush() {
	k.mu.Lock()
	m := k.held
	k.held = nil
	k.timer.Stop()
	k.mu.Unlock()
	if m != nil {
		_ = m.Ack()
	}
}
