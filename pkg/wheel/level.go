package wheel

import (
	"math"
	"math/bits"
)

// level is one ring. Its slots are a window of n consecutive ticks
// starting at the current tick c: slot s holds tick t with t mod n == s.
// Slot heads and occupancy bits live in the Wheel's shared arrays, starting
// at base (a multiple of 64, so that each level's bits are whole words).
type level struct {
	tick int64  // nanoseconds per slot
	n    int64  // slots
	unit int64  // nanoseconds per unit of entry off (1 unless tick > 2^32-1 ns)
	c    int64  // current tick: cur / tick
	cs   int64  // slot of the current tick: c % n
	end  int64  // end of the window: (c+n)*tick, saturated
	base uint32 // first slot id of this level
	w0   int    // first word of this level in Wheel.bits
	nw   int    // words of this level in Wheel.bits
	used int    // non-empty slots
}

func newLevels(cfg Config) ([]level, int) {
	ls := make([]level, len(cfg.Levels))
	next := 0
	for i, l := range cfg.Levels {
		tick := int64(l.Tick)
		unit := int64(1)
		if tick > math.MaxUint32 {
			unit = tick>>32 + 1
		}
		nw := (l.Slots + 63) / 64
		ls[i] = level{tick: tick, n: int64(l.Slots), unit: unit, base: uint32(next), w0: next / 64, nw: nw}
		next += nw * 64
	}
	return ls, next
}

// setCur moves the level's window to the tick holding offset cur.
func (l *level) setCur(cur int64) {
	l.c = cur / l.tick
	l.cs = l.c % l.n
	l.end = math.MaxInt64
	if l.c+l.n <= math.MaxInt64/l.tick {
		l.end = (l.c + l.n) * l.tick
	}
}

// slotOf returns the slot of tick t, which must be in [c, c+n).
func (l *level) slotOf(t int64) uint32 {
	s := l.cs + (t - l.c)
	if s >= l.n {
		s -= l.n
	}
	return l.base + uint32(s)
}

// offIn encodes deadline d, which lies in tick t of l, as a rounded-up
// offset; deadlineOf decodes it. Decoding never yields less than d.
func (l *level) offIn(d, t int64) uint32 {
	r := d - t*l.tick
	if l.unit == 1 {
		return uint32(r)
	}
	return uint32((r + l.unit - 1) / l.unit)
}

func (l *level) deadlineOf(t int64, off uint32) int64 {
	return t*l.tick + int64(off)*l.unit
}

// scan returns the first set bit in [from, to) of ws.
func scan(ws []uint64, from, to int64) (int64, bool) {
	if from >= to {
		return 0, false
	}
	wi := from >> 6
	w := ws[wi] &^ (uint64(1)<<(from&63) - 1)
	for {
		if w != 0 {
			s := wi<<6 + int64(bits.TrailingZeros64(w))
			return s, s < to
		}
		wi++
		if wi<<6 >= to {
			return 0, false
		}
		w = ws[wi]
	}
}

// firstTick returns the earliest non-empty tick of l in [from, c+n),
// where from >= c.
func (w *Wheel[T]) firstTick(l *level, from int64) (int64, bool) {
	if l.used == 0 || from >= l.c+l.n {
		return 0, false
	}
	ws := w.bits[l.w0 : l.w0+l.nw]
	p := from % l.n
	s, ok := scan(ws, p, l.n)
	if !ok {
		if s, ok = scan(ws, 0, p); !ok {
			return 0, false
		}
	}
	t := from + (s-p+l.n)%l.n
	if t >= l.c+l.n {
		return 0, false
	}
	return t, true
}

// pushSlot links entry i at the head of slot id.
func (w *Wheel[T]) pushSlot(id, i uint32) {
	m := w.slab.meta(i)
	m.next = w.heads[id]
	if w.heads[id] == nilIdx {
		w.markSlot(id, true)
	}
	w.heads[id] = i
}

// detach empties slot id and returns its former head.
func (w *Wheel[T]) detach(id uint32) uint32 {
	h := w.heads[id]
	if h != nilIdx {
		w.heads[id] = nilIdx
		w.markSlot(id, false)
	}
	return h
}

func (w *Wheel[T]) markSlot(id uint32, set bool) {
	l := w.levelOfSlot(id)
	b := uint64(1) << (id & 63)
	if set {
		w.bits[id>>6] |= b
		l.used++
	} else {
		w.bits[id>>6] &^= b
		l.used--
	}
}

func (w *Wheel[T]) levelOfSlot(id uint32) *level {
	k := len(w.levels) - 1
	for k > 0 && id < w.levels[k].base {
		k--
	}
	return &w.levels[k]
}

// filter unlinks from the list at *head every entry for which drop returns
// true (after drop has dealt with it), and every dead entry, which it
// reclaims. It reports whether the list is now empty.
func (w *Wheel[T]) filter(head *uint32, drop func(i uint32, off uint32) bool) bool {
	link := head
	for i := *head; i != nilIdx; {
		m := w.slab.meta(i)
		next := m.next
		switch {
		case m.gen&1 == 0:
			*link = next
			w.slab.reclaim(i)
			w.dead--
		case drop != nil && drop(i, m.off):
			*link = next
		default:
			link = &m.next
		}
		i = next
	}
	return *head == nilIdx
}
