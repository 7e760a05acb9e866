package controller

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// eventMemoMax bounds eventMemo: past it, the entries are forgotten (the
// follower decodes those events).
const eventMemoMax = 8192

// eventMemo holds the events this replica published (publishEvent), by
// Msg-Id, with their encoding and the execution snapshot the history
// index takes from them, until the history follower reads them back from
// AX_EVT: a message whose data is byte for byte the encoding published is
// applied from the snapshot instead of being decoded again (the follower
// decoded every event this replica had just encoded: a JSON decode per
// event, 6 % of the controller's CPU under the dispatch benchmark). Any
// other message — another replica's event, one published before a
// restart, a re-publish the stream dropped as a duplicate of different
// data — is decoded as before.
type eventMemo struct {
	mu sync.Mutex
	m  map[string]memoEvent
	// hits counts the messages applied from the memo (tests).
	hits atomic.Uint64
}

type memoEvent struct {
	data []byte
	exec *protocol.Execution
}

// put remembers the event published as data with Msg-Id msgID; exec is
// what the follower's decode would make of it (snapshotOf).
func (em *eventMemo) put(msgID string, data []byte, exec *protocol.Execution) {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.m == nil || len(em.m) >= eventMemoMax {
		em.m = make(map[string]memoEvent, 256)
	}
	em.m[msgID] = memoEvent{data: data, exec: exec}
}

// take returns and forgets the snapshot of the event msgID when data is
// the encoding it was published as.
func (em *eventMemo) take(msgID string, data []byte) (*protocol.Execution, bool) {
	if msgID == "" {
		return nil, false
	}
	em.mu.Lock()
	e, ok := em.m[msgID]
	if ok {
		delete(em.m, msgID)
	}
	em.mu.Unlock()
	if !ok || !bytes.Equal(e.data, data) {
		return nil, false
	}
	em.hits.Add(1)
	return e.exec, true
}

// eventID returns the id an event was published with: its Msg-Id, or for a
// create's PENDING event the EventIDHeader (publishEvent).
func eventID(h nats.Header) string {
	if id := h.Get(jetstream.MsgIDHeader); id != "" {
		return id
	}
	return h.Get(protocol.EventIDHeader)
}
