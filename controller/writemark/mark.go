package writemark

import (
	"context"
	"sync"
	"time"
)

// Tracker holds the open ops of one controller process.
type Tracker struct {
	now func() time.Time

	mu        sync.Mutex
	seq       uint64
	open      map[uint64]*Op
	closed    bool
	untracked int
}

// New returns a tracker that dates ops with now (the wall clock written
// into records).
func New(now func() time.Time) *Tracker {
	return &Tracker{now: now, open: map[uint64]*Op{}}
}

// Op is one change of the controller's to executions: the record writes
// and the effects they cause.
type Op struct {
	t      *Tracker
	id     uint64
	begin  time.Time
	refs   int  // End and held effects still to come (under t.mu)
	failed bool // an effect may not be stored: open for good
	nested bool // an op of an enclosing call: End does nothing
	err    error
}

type opKey struct{}

// From returns the op ctx carries, nil when none.
func From(ctx context.Context) *Op {
	op, _ := ctx.Value(opKey{}).(*Op)
	return op
}

// Begin opens an op dated now and returns ctx carrying it. Inside an op
// (ctx carries one) it returns that op, whose End is then a no-op for the
// inner caller. A closed tracker returns an op whose Refused is
// ErrClosed: the caller must not write.
func (t *Tracker) Begin(ctx context.Context) (context.Context, *Op) {
	if outer := From(ctx); outer != nil && outer.t == t {
		return ctx, &Op{t: t, id: outer.id, nested: true, err: outer.err}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	op := &Op{t: t}
	if t.closed {
		op.err = ErrClosed
	} else {
		t.seq++
		op.id, op.begin, op.refs = t.seq, t.now(), 1
		t.open[op.id] = op
	}
	return context.WithValue(ctx, opKey{}, op), op
}

// Refused returns why no write may be made under op (ErrClosed), nil
// when it may.
func (o *Op) Refused() error { return o.err }

// Fail records that an effect of op may not be stored (or a write's
// outcome is unknown): the op stays open, and the mark before its begin,
// until the process ends. A nil op (no op: From found none) does nothing.
func (o *Op) Fail() {
	if o == nil {
		return
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if op := o.t.open[o.id]; op != nil {
		op.failed = true
	}
}

// Hold keeps op open past its End until release is called: with ok true
// when the held effects were stored, false when they may not be (Fail).
func (o *Op) Hold() (release func(ok bool)) {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	op := o.t.open[o.id]
	if op == nil {
		return func(bool) {}
	}
	op.refs++
	var once sync.Once
	return func(ok bool) {
		once.Do(func() {
			o.t.mu.Lock()
			defer o.t.mu.Unlock()
			if !ok {
				op.failed = true
			}
			o.t.unref(op)
		})
	}
}

// End finishes the caller's part of op. It is closed once every held
// effect is released too, unless it failed.
func (o *Op) End() {
	if o.nested || o.err != nil {
		return
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if op := o.t.open[o.id]; op != nil && op == o {
		o.t.unref(op)
	}
}

func (t *Tracker) unref(op *Op) {
	if op.refs > 0 {
		op.refs--
	}
	if op.refs == 0 && !op.failed {
		delete(t.open, op.id)
	}
}

// Untracked records a write made outside any op (a path that forgot to
// begin one): it is pinned like a failed op begun now, and counted.
func (t *Tracker) Untracked() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.open[t.seq] = &Op{t: t, id: t.seq, begin: t.now(), failed: true}
	t.untracked++
}

// UntrackedCount returns how many writes were made outside any op.
func (t *Tracker) UntrackedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.untracked
}

// Mark is what the tracker knows at one moment.
type Mark struct {
	// Through: every op begun before it has ended with its effects stored.
	Through time.Time
	// Open counts the ops not ended (in flight or failed); Failed those
	// that failed.
	Open, Failed int
}

// Mark returns the current mark.
func (t *Tracker) Mark() Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.markLocked()
}

func (t *Tracker) markLocked() Mark {
	m := Mark{Through: t.now(), Open: len(t.open)}
	for _, op := range t.open {
		if op.begin.Before(m.Through) {
			m.Through = op.begin
		}
		if op.failed {
			m.Failed++
		}
	}
	return m
}

// Close refuses every later op and returns the final mark; idle is true
// when no op is open, so that nothing this process wrote lacks its
// effects.
func (t *Tracker) Close() (m Mark, idle bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	m = t.markLocked()
	return m, m.Open == 0
}
