package wheel

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"
)

// model runs a Wheel next to a trivially correct reference and checks,
// after every operation, that every uncancelled item fires exactly once,
// never before its deadline, never later than the Advance that passes its
// deadline, and in finest-tick order.
type model struct {
	t       testing.TB
	w       *Wheel[int]
	start   time.Time
	tick0   int64
	live    map[int]item // by item id
	handles []Handle     // every handle ever returned, by item id
	done    map[int]bool // fired or cancelled
	lastTk  int64        // finest tick of the last fired item
	nextID  int
}

type item struct {
	h   Handle
	d   int64 // deadline offset
	eff int64 // max(deadline, wheel time at Add)
}

func newModel(t testing.TB, cfg Config) *model {
	start := time.Unix(1_700_000_000, 0)
	w, err := New[int](cfg, start)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w.minGC = 1 + int(cfg.Levels[0].Tick%5) // compact often, to exercise it
	return &model{t: t, w: w, start: start, tick0: int64(cfg.Levels[0].Tick),
		live: map[int]item{}, done: map[int]bool{}, lastTk: math.MinInt64}
}

func (m *model) now() int64 { return m.w.cur }

func (m *model) add(d int64) {
	id := m.nextID
	m.nextID++
	h := m.w.Add(m.start.Add(time.Duration(d)), id)
	if h == 0 {
		m.t.Fatalf("Add returned the zero Handle")
	}
	m.handles = append(m.handles, h)
	m.live[id] = item{h: h, d: d, eff: max(d, m.now())}
	m.checkLen("Add")
	m.checkWake()
}

func (m *model) cancel(id int) {
	if id < 0 || id >= len(m.handles) {
		if m.w.Cancel(Handle(uint64(id)<<32 | 0xfffff)) {
			m.t.Fatalf("Cancel of a forged handle returned true")
		}
		return
	}
	_, want := m.live[id]
	got := m.w.Cancel(m.handles[id])
	if got != want {
		m.t.Fatalf("Cancel(item %d) = %v, want %v (done=%v)", id, got, want, m.done[id])
	}
	if got {
		delete(m.live, id)
		m.done[id] = true
	}
	m.checkLen("Cancel")
	m.checkWake()
	m.checkSlab()
}

func (m *model) advance(to int64) {
	if to < m.now() {
		to = m.now()
	}
	var fired []int
	m.w.Advance(m.start.Add(time.Duration(to)), func(id int) {
		it, ok := m.live[id]
		if !ok {
			m.t.Fatalf("item %d fired but is not pending (done=%v)", id, m.done[id])
		}
		if it.d > to {
			m.t.Fatalf("item %d fired early: deadline +%v, now +%v", id, time.Duration(it.d), time.Duration(to))
		}
		tk := it.eff / m.tick0
		if tk < m.lastTk {
			m.t.Fatalf("item %d (tick %d) fired after an item of tick %d", id, tk, m.lastTk)
		}
		m.lastTk = tk
		delete(m.live, id)
		m.done[id] = true
		fired = append(fired, id)
	})
	var missed []int
	for id, it := range m.live {
		if it.d <= to {
			missed = append(missed, id)
		}
	}
	if len(missed) > 0 {
		sort.Ints(missed)
		m.t.Fatalf("Advance(+%v) did not fire due items %v (first deadline +%v)",
			time.Duration(to), missed, time.Duration(m.live[missed[0]].d))
	}
	m.checkLen("Advance")
	m.checkWake()
	m.checkSlab()
}

// checkSlab verifies the slab accounting: every entry is pending, dead in
// a list, or free, and the counts agree.
func (m *model) checkSlab() {
	w := m.w
	free := 0
	for i := w.slab.free; i != nilIdx; i = w.slab.next(i) {
		if w.slab.live(i) {
			m.t.Fatalf("entry %d is on the free list but pending", i)
		}
		free++
	}
	if got := free + w.n + w.dead; got != int(w.slab.n) {
		m.t.Fatalf("free %d + pending %d + dead %d = %d, slab holds %d", free, w.n, w.dead, got, w.slab.n)
	}
}

// checkWake verifies that NextWake is no later than the end of the finest
// slot of any pending item, and not in the past unless an item is due.
func (m *model) checkWake() {
	wake, ok := m.w.NextWake()
	if ok != (len(m.live) > 0) {
		m.t.Fatalf("NextWake ok=%v with %d pending", ok, len(m.live))
	}
	if !ok {
		return
	}
	off := int64(wake.Sub(m.start))
	for id, it := range m.live {
		if it.d <= m.now() && off != m.now() {
			m.t.Fatalf("item %d is due (deadline +%v) but NextWake is +%v, not now +%v",
				id, time.Duration(it.d), time.Duration(off), time.Duration(m.now()))
		}
		end := max(m.now(), (it.eff/m.tick0+1)*m.tick0)
		if it.eff/m.tick0 >= math.MaxInt64/m.tick0-1 {
			continue
		}
		if off > end {
			m.t.Fatalf("NextWake +%v is after the slot end +%v of item %d (deadline +%v)",
				time.Duration(off), time.Duration(end), id, time.Duration(it.d))
		}
	}
	if off < m.now() {
		m.t.Fatalf("NextWake +%v is before the wheel time +%v", time.Duration(off), time.Duration(m.now()))
	}
}

func (m *model) checkLen(op string) {
	if m.w.Len() != len(m.live) {
		m.t.Fatalf("after %s: Len() = %d, want %d", op, m.w.Len(), len(m.live))
	}
}

// finish advances far enough for everything to fire.
func (m *model) finish() {
	far := int64(0)
	for _, it := range m.live {
		far = max(far, it.d)
	}
	m.advance(far)
	if len(m.live) != 0 {
		m.t.Fatalf("%d items never fired", len(m.live))
	}
	for id := range m.handles {
		if !m.done[id] {
			m.t.Fatalf("item %d neither fired nor was cancelled", id)
		}
	}
}

func (m *model) String() string { return fmt.Sprintf("model{%v live=%d}", m.w, len(m.live)) }

// smallConfigs have few slots so that random operations cross every
// level boundary, cascade and overflow often.
var smallConfigs = []Config{
	{Levels: []Level{{Tick: 10, Slots: 4}, {Tick: 40, Slots: 4}}},
	{Levels: []Level{{Tick: 10, Slots: 8}, {Tick: 20, Slots: 3}, {Tick: 60, Slots: 5}}},
	{Levels: []Level{{Tick: 7, Slots: 2}}},
	{Levels: []Level{{Tick: 5, Slots: 10}, {Tick: 10, Slots: 70}}},
	{Levels: []Level{{Tick: 1, Slots: 100}, {Tick: 100, Slots: 65}, {Tick: 6500, Slots: 2}}},
	DefaultConfig(),
}
