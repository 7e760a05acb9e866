package scheduler

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// message is what reaches the scheduler goroutine: one of the types below,
// each handled by one case of Scheduler.handle. They come from the wheels,
// the store writer (a write became durable), the workers and the link.
type message interface{ message() }

type (
	// wheelFired: a wheel item is due (it holds a fire slot).
	wheelFired struct{ w wheelItem }
	// flushFires: write the fires batched in this pass.
	flushFires struct{}
	// firesWritten: a batch of periodic fires is durable (or failed).
	firesWritten struct {
		batch []*fireRec
		err   error
	}
	// runTriggered: a run item's TRIGGERED write finished.
	runTriggered struct {
		w   wheelItem
		row store.Exec
		ok  bool
		err error
	}
	// batchStarted: a batch of dispatched attempts is RUNNING (durable).
	batchStarted struct {
		batch []*item
		ok    []bool
		err   error
	}
	// slotFreed: a worker finished its handler, which ran for dur.
	slotFreed struct{ dur time.Duration }
	// attemptDone: an attempt's final state is durable (or failed).
	attemptDone struct{ it *item }
	// attemptFenced: a worker took an attempt whose group lease moved on
	// while it waited (item.fenced) and did not run it.
	attemptFenced struct{ it *item }
	// fenceDropped: an attempt of a lost lease is finished unrun.
	fenceDropped struct {
		rowID    int64
		e        store.Exec
		why      string
		reported bool
		err      error
		it       *item // the queued attempt it was, if any
	}
	// jobAssigned, jobUnassigned, runStored, attemptCancelled,
	// leaseEpochSet, leaseLost: a command is durable (commands.go).
	jobAssigned   struct{ row store.Job }
	jobUnassigned struct{ id string }
	runStored     struct {
		e    store.Exec
		due  bool
		spec *runSpec // of the command's job
		// started: stored RUNNING on a slot the applier took
		// (directstart.go), for a worker at once.
		started bool
	}
	// slotBack: the applier took a worker slot and did not use it
	// (directstart.go).
	slotBack         struct{}
	attemptCancelled struct{ rowID int64 }
	leaseEpochSet    struct {
		jobID string
		epoch uint64
	}
	leaseLost struct {
		jobID string
		epoch uint64
	}
	// heartbeatReplied: leases renewed or lost by a heartbeat sent at t0
	// (urgent: handled before the messages waiting).
	heartbeatReplied struct {
		t0      time.Time
		renewed []protocol.Lease
		lost    []protocol.HeldLease
	}
	// skewCheck: the clock offset changed (a registration).
	skewCheck struct{}
)

func (wheelFired) message()       {}
func (flushFires) message()       {}
func (firesWritten) message()     {}
func (runTriggered) message()     {}
func (batchStarted) message()     {}
func (slotFreed) message()        {}
func (attemptDone) message()      {}
func (attemptFenced) message()    {}
func (fenceDropped) message()     {}
func (jobAssigned) message()      {}
func (jobUnassigned) message()    {}
func (runStored) message()        {}
func (slotBack) message()         {}
func (attemptCancelled) message() {}
func (leaseEpochSet) message()    {}
func (leaseLost) message()        {}
func (heartbeatReplied) message() {}
func (skewCheck) message()        {}

// mailbox is the scheduler's queue of messages: unbounded, so that a
// sender never blocks (the store writer must not wait for the scheduler,
// which waits for room in the store's queue), in order, with an urgent
// lane read before the rest. The wheels are bounded separately
// (fireSlots).
type mailbox struct {
	mu     sync.Mutex
	normal []message
	urgent []message
	// nUrgent is len(urgent), read between messages without the lock.
	nUrgent atomic.Int32
	notify  chan struct{}
}

func newMailbox() *mailbox { return &mailbox{notify: make(chan struct{}, 1)} }

func (m *mailbox) wake() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// post queues msg. It never blocks.
func (m *mailbox) post(msg message) {
	m.mu.Lock()
	m.normal = append(m.normal, msg)
	m.mu.Unlock()
	m.wake()
}

// postUrgent queues msg ahead of the normal messages. It never blocks.
func (m *mailbox) postUrgent(msg message) {
	m.mu.Lock()
	m.urgent = append(m.urgent, msg)
	m.nUrgent.Store(int32(len(m.urgent)))
	m.mu.Unlock()
	m.wake()
}

// takeUrgent returns the urgent messages queued so far.
func (m *mailbox) takeUrgent() []message {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.urgent
	m.urgent = nil
	m.nUrgent.Store(0)
	return u
}

// hasUrgent reports whether urgent messages wait.
func (m *mailbox) hasUrgent() bool { return m.nUrgent.Load() > 0 }

// take returns the normal messages queued so far.
func (m *mailbox) take() []message {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.normal
	m.normal = nil
	return b
}

// putBack returns the messages not handled to the front of the queue.
func (m *mailbox) putBack(rest []message) {
	m.mu.Lock()
	m.normal = append(rest[:len(rest):len(rest)], m.normal...)
	m.mu.Unlock()
}

// pending is how many messages wait; it sets notify again if any do.
func (m *mailbox) pending() int {
	m.mu.Lock()
	n := len(m.normal) + len(m.urgent)
	m.mu.Unlock()
	if n > 0 {
		m.wake()
	}
	return n
}

// len is how many messages wait.
func (m *mailbox) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.normal) + len(m.urgent)
}

// drop forgets every message (a test without a scheduler goroutine).
func (m *mailbox) drop() {
	m.mu.Lock()
	m.normal, m.urgent = nil, nil
	m.nUrgent.Store(0)
	m.mu.Unlock()
}
