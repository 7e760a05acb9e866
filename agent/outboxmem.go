package agent

import (
	"sort"
	"sync"

	"github.com/axsched/ax/agent/store"
)

// memOutbox holds the outbox rows committed since the store's outbox sink
// was set and not yet acknowledged, so that the flusher publishes them
// from memory: a report is handed over only once its row is durable
// (store.SetOutboxSink), and the row stays in SQLite until its PubAck.
//
// It is bounded: past max rows the oldest half is let go (they are still
// in SQLite) and base moves past them. Invariant: every committed row with
// seq > base that is not acknowledged is in rows, in seq order; rows with
// seq ≤ base are read from the store.
type memOutbox struct {
	mu   sync.Mutex
	rows []store.OutboxMsg
	base int64
	set  bool // base is known
	max  int
	kick func()
}

func newMemOutbox(max int, kick func()) *memOutbox { return &memOutbox{max: max, kick: kick} }

// add is the store's sink: rows just committed, in seq order. Rows are
// never changed in place (the flusher may hold a window of them), only
// resliced.
func (m *memOutbox) add(rows []store.OutboxMsg) {
	m.mu.Lock()
	m.rows = append(m.rows, rows...)
	if len(m.rows) > m.max {
		drop := len(m.rows) - m.max/2
		m.base = max(m.base, m.rows[drop-1].Seq)
		m.rows = m.rows[drop:]
	}
	m.mu.Unlock()
	m.kick()
}

// setBase records the sink's base (rows up to it are only in SQLite).
func (m *memOutbox) setBase(base int64) {
	m.mu.Lock()
	m.base, m.set = max(m.base, base), true
	m.mu.Unlock()
}

// after returns up to limit rows with seq > sent; ok is false when rows
// after sent may be missing from memory (read the store then).
func (m *memOutbox) after(sent int64, limit int) (rows []store.OutboxMsg, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.set || sent < m.base {
		return nil, false
	}
	i := sort.Search(len(m.rows), func(i int) bool { return m.rows[i].Seq > sent })
	n := min(len(m.rows)-i, limit)
	return m.rows[i : i+n : i+n], true
}

// acked lets go of the rows up to seq.
func (m *memOutbox) acked(seq int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.rows), func(i int) bool { return m.rows[i].Seq > seq })
	m.rows = m.rows[i:]
	if len(m.rows) == 0 {
		m.rows = nil
	}
}

// last returns the highest seq handed over so far (base when none is held).
func (m *memOutbox) last() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.rows); n > 0 {
		return m.rows[n-1].Seq
	}
	return m.base
}
