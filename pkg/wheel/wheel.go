package wheel

import (
	"fmt"
	"math"
	"time"
)

// compactMin is the number of cancelled entries below which they are only
// reclaimed when their list is walked.
const compactMin = 1024

// Wheel is the deterministic core: time only moves when Advance is called
// with a later instant. It is not safe for concurrent use; Driver wraps it
// for that.
type Wheel[T any] struct {
	start  time.Time
	cur    int64 // nanoseconds since start up to which time has advanced
	levels []level
	heads  []uint32 // slot list heads, indexed by slot id
	bits   []uint64 // slot occupancy, one bit per slot id
	slab   slab[T]
	ovf    overflow
	n      int  // pending items
	dead   int  // cancelled entries still linked in a list
	minGC  int  // compact once dead >= minGC and dead > n/2
	due    bool // an item was added with a deadline <= cur
	busy   bool // inside Advance; Add, Cancel and Drain are refused
}

// New returns an empty wheel whose clock reads start. Deadlines are
// converted once, at Add, to an offset from start with deadline.Sub(start),
// so times taken from the same monotonic clock as start compare on it.
func New[T any](cfg Config, start time.Time) (*Wheel[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ls, slots := newLevels(cfg)
	w := &Wheel[T]{
		start:  start,
		levels: ls,
		heads:  make([]uint32, slots),
		bits:   make([]uint64, slots/64),
		slab:   slab[T]{free: nilIdx},
		ovf:    newOverflow(ls[len(ls)-1]),
		minGC:  compactMin,
	}
	for i := range w.heads {
		w.heads[i] = nilIdx
	}
	w.setCur(0)
	return w, nil
}

// Now returns the instant the wheel has advanced to.
func (w *Wheel[T]) Now() time.Time { return w.start.Add(time.Duration(w.cur)) }

// Len returns the number of pending items.
func (w *Wheel[T]) Len() int { return w.n }

// Add schedules v to fire at deadline and returns a handle for Cancel. A
// deadline at or before the wheel's current time fires at the next Advance.
// Add is O(1); the first item of a new overflow bucket adds a map insert
// and an O(log buckets) heap push.
func (w *Wheel[T]) Add(deadline time.Time, v T) Handle {
	h, _ := w.add(deadline, v)
	return h
}

// add also returns the earliest offset at which the item can fire, which
// the Driver uses to decide whether to wake its goroutine.
func (w *Wheel[T]) add(deadline time.Time, v T) (Handle, int64) {
	if w.busy {
		panic("wheel: Add called from inside Advance")
	}
	d := int64(deadline.Sub(w.start))
	if d <= w.cur {
		d = w.cur
		w.due = true
	}
	i, gen := w.slab.alloc(v)
	wake := w.place(i, d)
	if d == w.cur {
		wake = w.cur
	}
	w.n++
	return makeHandle(i, gen), wake
}

// place links entry i, due at offset d >= cur, into the finest level whose
// window holds d, or into the overflow. It returns the earliest offset at
// which the entry can fire.
func (w *Wheel[T]) place(i uint32, d int64) int64 {
	m := w.slab.meta(i)
	tick0 := w.levels[0].tick
	for k := range w.levels {
		l := &w.levels[k]
		if d < l.end {
			t := d / l.tick
			m.off = l.offIn(d, t)
			w.pushSlot(l.slotOf(t), i)
			if k == 0 {
				return addSat(t*l.tick, l.tick)
			}
			return addSat(t*l.tick, tick0)
		}
	}
	key, off := w.ovf.keyOf(d)
	m.off = off
	b := &w.ovf.b[w.ovf.get(key)]
	m.next = b.head
	b.head = i
	return addSat(key*w.ovf.span, tick0)
}

// Cancel reports whether the item h names was pending, and if so makes
// sure it never fires. It returns false for an item that already fired or
// was cancelled, for the zero Handle and for handles that match no pending
// entry. Cancel is O(1): the item is cleared at once, while its 12-byte
// list entry is reclaimed the next time its list is walked, or by a
// compaction (amortised O(1)) once cancelled entries outnumber half the
// pending ones.
func (w *Wheel[T]) Cancel(h Handle) bool {
	if w.busy {
		panic("wheel: Cancel called from inside Advance")
	}
	i, gen := h.index(), h.gen()
	if gen&1 == 0 || i >= w.slab.n {
		return false
	}
	if m := w.slab.meta(i); m.gen != gen {
		return false
	}
	w.slab.kill(i)
	w.n--
	w.dead++
	if w.dead >= w.minGC && w.dead > w.n/2 {
		w.compact()
	}
	return true
}

// Advance moves the wheel's time to now and calls fire, on the calling
// goroutine, for every pending item whose deadline is <= now: never one
// whose deadline is later. Items fire in order of their finest-level tick
// (items of one tick in any order). A now earlier than the wheel's time is
// treated as the wheel's time. fire must not be nil and must not call Add,
// Cancel or Drain on w (collect the items and act after Advance returns);
// either panics.
func (w *Wheel[T]) Advance(now time.Time, fire func(v T)) {
	if fire == nil {
		panic("wheel: Advance called with a nil fire func")
	}
	n := int64(now.Sub(w.start))
	if n < w.cur {
		n = w.cur
	}
	w.busy = true
	defer func() { w.busy = false }()
	l0 := &w.levels[0]
	for {
		b, ok := w.nextBoundary()
		if !ok || b > n {
			break
		}
		w.fireBefore(b/l0.tick, fire)
		w.setCur(b)
		w.cascade(b)
	}
	w.fireBefore(n/l0.tick, fire)
	w.setCur(n)
	w.fireDue(n, fire)
	w.due = false
}

// nextBoundary returns the earliest offset after cur at which a higher
// level's slot or an overflow bucket must be moved down.
func (w *Wheel[T]) nextBoundary() (int64, bool) {
	best, found := int64(math.MaxInt64), false
	for k := 1; k < len(w.levels); k++ {
		l := &w.levels[k]
		if t, ok := w.firstTick(l, l.c+1); ok && t*l.tick < best {
			best, found = t*l.tick, true
		}
	}
	if key, _, ok := w.ovf.min(); ok {
		if b := w.ovf.boundary(key, &w.levels[len(w.levels)-1]); b < best {
			best, found = b, true
		}
	}
	return best, found
}

func (w *Wheel[T]) setCur(n int64) {
	w.cur = n
	for k := range w.levels {
		w.levels[k].setCur(n)
	}
}

// cascade moves down everything that becomes placeable at offset b == cur:
// overflow buckets now inside the top window, then each higher level's
// slot for the tick starting at b, top first.
func (w *Wheel[T]) cascade(b int64) {
	top := &w.levels[len(w.levels)-1]
	for {
		key, id, ok := w.ovf.min()
		if !ok || w.ovf.boundary(key, top) > b {
			break
		}
		w.replace(w.ovf.remove(id), func(off uint32) int64 { return w.ovf.deadlineOf(key, off) })
	}
	for k := len(w.levels) - 1; k >= 1; k-- {
		l := &w.levels[k]
		if l.c*l.tick != b {
			continue
		}
		w.replace(w.detach(l.slotOf(l.c)), func(off uint32) int64 { return l.deadlineOf(l.c, off) })
	}
}

// replace re-places every live entry of a detached list, using deadline to
// decode its offset, and reclaims the dead ones.
func (w *Wheel[T]) replace(i uint32, deadline func(off uint32) int64) {
	for i != nilIdx {
		m := w.slab.meta(i)
		next := m.next
		if m.gen&1 == 0 {
			w.slab.reclaim(i)
			w.dead--
		} else {
			w.place(i, max(deadline(m.off), w.cur))
		}
		i = next
	}
}

// fireBefore fires, in tick order, every finest-level slot whose tick is
// before end.
func (w *Wheel[T]) fireBefore(end int64, fire func(T)) {
	l := &w.levels[0]
	for {
		t, ok := w.firstTick(l, l.c)
		if !ok || t >= end {
			return
		}
		for i := w.detach(l.slotOf(t)); i != nilIdx; {
			m := w.slab.meta(i)
			next := m.next
			if m.gen&1 == 0 {
				w.slab.reclaim(i)
				w.dead--
			} else {
				w.n--
				fire(w.slab.take(i))
			}
			i = next
		}
	}
}

// fireDue fires the items of the current finest-level slot due by n.
func (w *Wheel[T]) fireDue(n int64, fire func(T)) {
	l := &w.levels[0]
	id := l.slotOf(l.c)
	if w.heads[id] == nilIdx {
		return
	}
	empty := w.filter(&w.heads[id], func(i, off uint32) bool {
		if l.deadlineOf(l.c, off) > n {
			return false
		}
		w.n--
		fire(w.slab.take(i))
		return true
	})
	if empty {
		w.markSlot(id, false)
	}
}

// compact reclaims every cancelled entry.
func (w *Wheel[T]) compact() {
	for k := range w.levels {
		l := &w.levels[k]
		for t, ok := w.firstTick(l, l.c); ok; {
			id := l.slotOf(t)
			if w.filter(&w.heads[id], nil) {
				w.markSlot(id, false)
			}
			t, ok = w.firstTick(l, t+1)
		}
	}
	var empty []uint32
	for _, id := range w.ovf.heap {
		if w.filter(&w.ovf.b[id].head, nil) {
			empty = append(empty, id)
		}
	}
	for _, id := range empty {
		w.ovf.remove(id)
	}
}

// NextWake returns when Advance must next be called for no item to fire
// late by more than its finest-level tick: the end of the earliest
// non-empty finest-level slot, or the first tick of the earliest non-empty
// higher slot or overflow bucket plus one finest tick. It returns the
// wheel's current time if an item is already due, and false when nothing
// is pending. It costs O(slots/64) word tests. A slot or bucket holding
// only cancelled items may cause one wake-up that fires nothing.
func (w *Wheel[T]) NextWake() (time.Time, bool) {
	off, ok := w.nextWake()
	if !ok {
		return time.Time{}, false
	}
	return w.start.Add(time.Duration(off)), true
}

func (w *Wheel[T]) nextWake() (int64, bool) {
	if w.n == 0 {
		return 0, false
	}
	if w.due {
		return w.cur, true
	}
	l0 := &w.levels[0]
	best := int64(math.MaxInt64)
	if t, ok := w.firstTick(l0, l0.c); ok {
		best = addSat(t*l0.tick, l0.tick)
	}
	for k := 1; k < len(w.levels); k++ {
		l := &w.levels[k]
		if t, ok := w.firstTick(l, l.c+1); ok {
			best = min(best, addSat(t*l.tick, l0.tick))
		}
	}
	if key, _, ok := w.ovf.min(); ok {
		best = min(best, addSat(key*w.ovf.span, l0.tick))
	}
	return best, true
}

// Drain removes every pending item and returns them in no particular
// order. Handles of drained items no longer cancel anything.
func (w *Wheel[T]) Drain() []T {
	if w.busy {
		panic("wheel: Drain called from inside Advance")
	}
	out := make([]T, 0, w.n)
	take := func(i uint32) {
		for i != nilIdx {
			m := w.slab.meta(i)
			next := m.next
			if m.gen&1 == 0 {
				w.slab.reclaim(i)
			} else {
				out = append(out, w.slab.take(i))
			}
			i = next
		}
	}
	for k := range w.levels {
		l := &w.levels[k]
		for s := int64(0); s < l.n && l.used > 0; s++ {
			take(w.detach(l.base + uint32(s)))
		}
	}
	for w.ovf.len() > 0 {
		_, id, _ := w.ovf.min()
		take(w.ovf.remove(id))
	}
	w.n, w.dead, w.due = 0, 0, false
	return out
}

// String describes the wheel's state, for debugging.
func (w *Wheel[T]) String() string {
	return fmt.Sprintf("wheel{now=+%v pending=%d cancelled-unreclaimed=%d buckets=%d}",
		time.Duration(w.cur), w.n, w.dead, w.ovf.len())
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
