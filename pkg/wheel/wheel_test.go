package wheel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// where reports which list holds the pending entry of h: "L0", "L1", ...
// or "overflow"; "" if h is not pending.
func where[T any](w *Wheel[T], h Handle) string {
	i := h.index()
	if i >= w.slab.n {
		return ""
	}
	if w.slab.meta(i).gen != h.gen() {
		return ""
	}
	holds := func(head uint32) bool {
		for e := head; e != nilIdx; e = w.slab.next(e) {
			if e == i {
				return true
			}
		}
		return false
	}
	for k, l := range w.levels {
		for s := int64(0); s < l.n; s++ {
			if holds(w.heads[l.base+uint32(s)]) {
				return fmt.Sprintf("L%d", k)
			}
		}
	}
	for _, id := range w.ovf.heap {
		if holds(w.ovf.b[id].head) {
			return "overflow"
		}
	}
	return "?"
}

func collect[T any](w *Wheel[T], now time.Time) []T {
	var out []T
	w.Advance(now, func(v T) { out = append(out, v) })
	return out
}

func mustNew[T any](t *testing.T, cfg Config) *Wheel[T] {
	t.Helper()
	w, err := New[T](cfg, t0)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return w
}

// TestLevelBoundaries adds one item exactly at, just before and just after
// every level boundary, checks the level it lands in, that it does not
// fire 1 ns before its deadline, and that it fires at its deadline.
func TestLevelBoundaries(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	cases := []struct {
		cfg   string
		from  time.Duration // advance the empty wheel here first
		after time.Duration // deadline, relative to from
		where string
	}{
		{"default", 0, 0, "L0"},
		{"default", 0, 1, "L0"},
		{"default", 0, 10*ms - 1, "L0"},
		{"default", 0, 10 * ms, "L0"},
		{"default", 0, 10*s - 1, "L0"},
		{"default", 0, 10 * s, "L1"},
		{"default", 0, 10*s + 1, "L1"},
		{"default", 0, 3600*s - 1, "L1"},
		{"default", 0, 3600 * s, "overflow"},
		{"default", 0, 3600*s + 1, "overflow"},
		{"default", 0, 24 * 3600 * s, "overflow"},
		{"default", 0, 1000 * 24 * 3600 * s, "overflow"},
		// From mid-tick, the window is counted from the current tick.
		{"default", 7*s + 3*ms, 10*s - 3*ms - 1, "L0"},
		{"default", 7*s + 3*ms, 10*s - 3*ms, "L1"},
		{"default", 7*s + 3*ms, 3607*s - 7*s - 3*ms - 1, "L1"}, // L1 window: ticks [7, 3607)
		{"default", 7*s + 3*ms, 3607*s - 7*s - 3*ms, "overflow"},
		{"fine", 0, 1*ms - 1, "L0"},
		{"fine", 0, 1 * ms, "L0"},
		{"fine", 0, 1*s - 1, "L0"},
		{"fine", 0, 1 * s, "L1"},
		{"fine", 0, 3600*s - 1, "L1"},
		{"fine", 0, 3600 * s, "overflow"},
		{"fine", 999 * ms, 1*s - 1, "L0"}, // L0 window: ticks [999, 1999)
		{"fine", 999 * ms, 1 * s, "L1"},
		{"three", 0, 99, "L0"},
		{"three", 0, 100, "L1"},
		{"three", 0, 999, "L1"},
		{"three", 0, 1000, "L2"},
		{"three", 0, 9999, "L2"},
		{"three", 0, 10000, "overflow"},
		{"three", 12345, 22000 - 12345 - 1, "L2"}, // L2 window: ticks [12, 22)
		{"three", 12345, 22000 - 12345, "overflow"},
	}
	cfgs := map[string]Config{
		"default": DefaultConfig(),
		"fine":    FineConfig(),
		"three":   {Levels: []Level{{Tick: 1, Slots: 100}, {Tick: 100, Slots: 10}, {Tick: 1000, Slots: 10}}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/from=%v/+%v", tc.cfg, tc.from, tc.after), func(t *testing.T) {
			w := mustNew[string](t, cfgs[tc.cfg])
			w.Advance(at(tc.from), func(string) { t.Fatal("empty wheel fired") })
			dl := at(tc.from + tc.after)
			h := w.Add(dl, "x")
			if got := where(w, h); got != tc.where {
				t.Fatalf("placed in %q, want %q", got, tc.where)
			}
			if tc.after > 0 {
				if got := collect(w, dl.Add(-1)); len(got) != 0 {
					t.Fatalf("fired 1 ns before its deadline")
				}
			}
			if got := collect(w, dl); !slices.Equal(got, []string{"x"}) {
				t.Fatalf("at its deadline fired %v, want [x]", got)
			}
			if w.Len() != 0 {
				t.Fatalf("Len = %d after firing", w.Len())
			}
		})
	}
}

// TestCascade follows one item from the overflow heap down through every
// level and checks where it sits at each step.
func TestCascade(t *testing.T) {
	cfg := Config{Levels: []Level{{Tick: 1, Slots: 100}, {Tick: 100, Slots: 10}, {Tick: 1000, Slots: 10}}}
	steps := []struct {
		now   time.Duration
		where string
	}{
		{0, "overflow"}, // bucket 1: L2 ticks [10, 20)
		{1000, "overflow"},
		{9999, "overflow"},
		{10000, "L2"}, // the whole bucket fits the L2 window [10, 20)
		{11999, "L2"},
		{12000, "L1"}, // L2 tick 12 begins: cascade into L1
		{12399, "L1"},
		{12400, "L0"}, // L1 tick 124 begins: cascade into L0
		{12444, "L0"},
		{12445, ""}, // fired
	}
	w := mustNew[int](t, cfg)
	h := w.Add(at(12445), 1)
	fired := 0
	for _, st := range steps {
		w.Advance(at(st.now), func(int) { fired++ })
		if got := where(w, h); got != st.where {
			t.Fatalf("at +%d: in %q, want %q", st.now, got, st.where)
		}
		if wantFired := st.where == ""; (fired == 1) != wantFired {
			t.Fatalf("at +%d: fired=%d", st.now, fired)
		}
	}
}

// TestCancel covers cancelling from every place an item can be, after
// cascades, and with stale, forged and zero handles.
func TestCancel(t *testing.T) {
	cases := []struct {
		name    string
		advance time.Duration // before cancelling
		where   string        // where the item is when cancelled
	}{
		{"in L0", 0, "L0"},
		{"in L1", 0, "L1"},
		{"in overflow", 0, "overflow"},
		{"after cascade L1 to L0", 2*time.Hour + 7200*time.Millisecond, "L0"},
		{"after move overflow to L1", time.Hour + 10*time.Second, "L1"},
	}
	deadlines := map[string]time.Duration{"L0": 5 * time.Second, "L1": 20 * time.Minute, "overflow": 2*time.Hour + 7500*time.Millisecond}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := mustNew[string](t, DefaultConfig())
			dl := deadlines[tc.where]
			if tc.advance > 0 {
				dl = deadlines["overflow"]
			}
			h := w.Add(at(dl), "x")
			keep := w.Add(at(dl), "keep") // same list: unlink must not lose it
			w.Advance(at(tc.advance), func(string) { t.Fatal("fired early") })
			if got := where(w, h); got != tc.where {
				t.Fatalf("item is in %q, want %q", got, tc.where)
			}
			if !w.Cancel(h) {
				t.Fatal("Cancel of a pending item returned false")
			}
			if w.Cancel(h) {
				t.Fatal("second Cancel returned true")
			}
			if w.Len() != 1 {
				t.Fatalf("Len = %d, want 1", w.Len())
			}
			if got := collect(w, at(3*time.Hour)); !slices.Equal(got, []string{"keep"}) {
				t.Fatalf("fired %v, want [keep]", got)
			}
			if w.Cancel(keep) {
				t.Fatal("Cancel after firing returned true")
			}
		})
	}
}

// TestCancelReclaims checks that cancelled entries are reclaimed: when
// their list is walked, and by compaction once they outnumber half the
// pending items, so that cancel-and-re-add cycles do not grow the slab.
func TestCancelReclaims(t *testing.T) {
	t.Run("when the list is walked", func(t *testing.T) {
		w := mustNew[int](t, DefaultConfig())
		a := w.Add(at(5*time.Hour), 1)
		b := w.Add(at(5*time.Hour+time.Millisecond), 2) // same bucket
		c := w.Add(at(time.Second), 3)
		w.Cancel(a)
		w.Cancel(b)
		w.Cancel(c)
		if w.dead != 3 || w.Len() != 0 {
			t.Fatalf("dead=%d Len=%d, want 3 and 0", w.dead, w.Len())
		}
		if _, ok := w.NextWake(); ok {
			t.Fatal("NextWake true with nothing pending")
		}
		if got := collect(w, at(6*time.Hour)); len(got) != 0 {
			t.Fatalf("cancelled items fired: %v", got)
		}
		if w.dead != 0 || w.ovf.len() != 0 || len(w.ovf.byKey) != 0 {
			t.Fatalf("after walking: dead=%d buckets=%d", w.dead, w.ovf.len())
		}
		// The freed entries are reused.
		for i := 0; i < 3; i++ {
			w.Add(at(7*time.Hour), i)
		}
		if w.slab.n != 3 {
			t.Fatalf("slab grew to %d entries, want 3", w.slab.n)
		}
	})
	t.Run("by compaction", func(t *testing.T) {
		w := mustNew[int](t, DefaultConfig())
		const live = 3000
		for i := 0; i < live; i++ {
			w.Add(at(time.Duration(i)*time.Second), i)
		}
		// Re-plan the same items over and over: cancel and re-add.
		for round := 0; round < 20; round++ {
			var hs []Handle
			for i := 0; i < live; i++ {
				hs = append(hs, w.Add(at(time.Duration(i)*3*time.Second), i))
			}
			for _, h := range hs {
				if !w.Cancel(h) {
					t.Fatal("Cancel of a pending item returned false")
				}
			}
		}
		if w.Len() != live {
			t.Fatalf("Len = %d, want %d", w.Len(), live)
		}
		if w.dead > live/2+compactMin || int(w.slab.n) > 3*live {
			t.Fatalf("dead=%d slab=%d entries for %d pending: not compacted", w.dead, w.slab.n, live)
		}
		if got := collect(w, at(10*time.Hour)); len(got) != live {
			t.Fatalf("fired %d, want %d", len(got), live)
		}
	})
}

func TestOverflowHeapOrder(t *testing.T) {
	w := mustNew[time.Duration](t, DefaultConfig())
	ds := []time.Duration{5 * time.Hour, time.Hour + time.Second, 3 * time.Hour,
		2*time.Hour + 500*time.Millisecond, 2 * time.Hour, 48 * time.Hour, time.Hour}
	for _, d := range ds {
		w.Add(at(d), d)
	}
	if w.ovf.len() != 5 { // 4 s buckets: 2h, 2h+500ms share one, 1h and 1h+1s too
		t.Fatalf("buckets = %d, want 5", w.ovf.len())
	}
	var got []time.Duration
	for w.Len() > 0 {
		wake, _ := w.NextWake()
		w.Advance(wake, func(d time.Duration) {
			if wake.Before(at(d)) {
				t.Fatalf("%v fired at +%v", d, wake.Sub(t0))
			}
			got = append(got, d)
		})
	}
	want := slices.Clone(ds)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestPastDeadlines(t *testing.T) {
	cases := []struct {
		name     string
		now      time.Duration // wheel time when adding
		deadline time.Duration
	}{
		{"before start", 0, -time.Hour},
		{"at now", 0, 0},
		{"1ns ago", 7 * time.Second, 7*time.Second - 1},
		{"a tick ago", 7 * time.Second, 7*time.Second - 10*time.Millisecond},
		{"an hour ago", 2 * time.Hour, time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := mustNew[int](t, DefaultConfig())
			collect(w, at(tc.now))
			w.Add(at(tc.deadline), 1)
			wake, ok := w.NextWake()
			if !ok || !wake.Equal(at(tc.now)) {
				t.Fatalf("NextWake = +%v %v, want now (+%v)", wake.Sub(t0), ok, tc.now)
			}
			if got := collect(w, at(tc.now)); len(got) != 1 {
				t.Fatalf("Advance(now) fired %d, want 1", len(got))
			}
		})
	}
}

func TestSameSlotBurst(t *testing.T) {
	const n = 10000
	w := mustNew[int](t, DefaultConfig())
	collect(w, at(time.Minute))
	base := time.Minute + 3*time.Second // a slot start
	for i := 0; i < n; i++ {
		w.Add(at(base+time.Duration(i%10)*time.Millisecond/10*10), i) // 0..9 ms into the slot
	}
	if w.levels[0].used != 1 {
		t.Fatalf("%d slots used, want 1", w.levels[0].used)
	}
	// Mid-slot: exactly the items due by then fire.
	mid := collect(w, at(base+4*time.Millisecond))
	if len(mid) != n/10*5 {
		t.Fatalf("mid-slot fired %d, want %d", len(mid), n/10*5)
	}
	for _, i := range mid {
		if i%10 > 4 {
			t.Fatalf("item %d fired before its deadline", i)
		}
	}
	rest := collect(w, at(base+10*time.Millisecond))
	if len(rest) != n-len(mid) || w.Len() != 0 {
		t.Fatalf("rest fired %d, Len %d", len(rest), w.Len())
	}
}

func TestAdvanceBackwardsIsNoop(t *testing.T) {
	w := mustNew[int](t, DefaultConfig())
	collect(w, at(time.Hour))
	w.Add(at(time.Hour+time.Second), 1)
	if got := collect(w, at(time.Minute)); len(got) != 0 {
		t.Fatalf("fired %v going backwards", got)
	}
	if !w.Now().Equal(at(time.Hour)) {
		t.Fatalf("Now = +%v, want +1h", w.Now().Sub(t0))
	}
}

func TestDrain(t *testing.T) {
	w := mustNew[int](t, DefaultConfig())
	var hs []Handle
	for i, d := range []time.Duration{0, time.Millisecond, time.Minute, 3 * time.Hour, 1000 * time.Hour} {
		hs = append(hs, w.Add(at(d), i))
	}
	got := w.Drain()
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("Drain = %v", got)
	}
	if w.Len() != 0 || w.ovf.len() != 0 || w.levels[0].used+w.levels[1].used != 0 {
		t.Fatalf("not empty after Drain: %v", w)
	}
	for _, h := range hs {
		if w.Cancel(h) {
			t.Fatal("Cancel after Drain returned true")
		}
	}
	if got := collect(w, at(2000*time.Hour)); len(got) != 0 {
		t.Fatalf("fired %v after Drain", got)
	}
}

func TestMisusePanics(t *testing.T) {
	cases := []struct {
		name string
		call func(w *Wheel[int], h Handle)
		want string
	}{
		{"Add inside Advance", func(w *Wheel[int], _ Handle) {
			w.Advance(at(0), func(int) { w.Add(at(time.Second), 2) })
		}, "Add called from inside Advance"},
		{"Cancel inside Advance", func(w *Wheel[int], h Handle) {
			w.Advance(at(0), func(int) { w.Cancel(h) })
		}, "Cancel called from inside Advance"},
		{"Drain inside Advance", func(w *Wheel[int], _ Handle) {
			w.Advance(at(0), func(int) { w.Drain() })
		}, "Drain called from inside Advance"},
		{"nil fire", func(w *Wheel[int], _ Handle) { w.Advance(at(0), nil) }, "nil fire"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := mustNew[int](t, DefaultConfig())
			w.Add(at(0), 1)
			h := w.Add(at(time.Hour), 3)
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
						t.Fatalf("recover() = %v, want a panic with %q", r, tc.want)
					}
				}()
				tc.call(w, h)
			}()
			if w.busy {
				t.Fatal("wheel still marked busy after the panic")
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"default", DefaultConfig(), ""},
		{"fine", FineConfig(), ""},
		{"kafka layout", Config{Levels: []Level{{Tick: time.Millisecond, Slots: 20}, {Tick: 20 * time.Millisecond, Slots: 20}}}, ""},
		{"one level", Config{Levels: []Level{{Tick: time.Second, Slots: 60}}}, ""},
		{"huge tick", Config{Levels: []Level{{Tick: time.Second, Slots: 60}, {Tick: time.Minute, Slots: 60}, {Tick: time.Hour, Slots: 24}}}, ""},
		{"no levels", Config{}, "Levels"},
		{"zero tick", Config{Levels: []Level{{Tick: 0, Slots: 10}}}, "Levels[0].Tick"},
		{"negative tick", Config{Levels: []Level{{Tick: -1, Slots: 10}}}, "Levels[0].Tick"},
		{"one slot", Config{Levels: []Level{{Tick: 1, Slots: 1}}}, "Levels[0].Slots"},
		{"too many slots", Config{Levels: []Level{{Tick: 1, Slots: MaxSlots + 1}}}, "Levels[0].Slots"},
		{"too many in total", Config{Levels: []Level{{Tick: 1, Slots: MaxSlots}, {Tick: 2, Slots: MaxSlots}, {Tick: 4, Slots: MaxSlots}, {Tick: 8, Slots: MaxSlots}, {Tick: 16, Slots: 2}}}, "Levels[4].Slots"},
		{"span overflows", Config{Levels: []Level{{Tick: time.Duration(1) << 62, Slots: 4}}}, "Levels[0]"},
		{"not a multiple", Config{Levels: []Level{{Tick: 10 * time.Millisecond, Slots: 1000}, {Tick: 15 * time.Millisecond, Slots: 10}}}, "Levels[1].Tick"},
		{"same tick", Config{Levels: []Level{{Tick: 10, Slots: 10}, {Tick: 10, Slots: 10}}}, "Levels[1].Tick"},
		{"finer above", Config{Levels: []Level{{Tick: 10, Slots: 10}, {Tick: 5, Slots: 10}}}, "Levels[1].Tick"},
		{"gap above span", Config{Levels: []Level{{Tick: 10 * time.Millisecond, Slots: 100}, {Tick: 2 * time.Second, Slots: 10}}}, "Levels[1].Tick"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, newErr := New[int](tc.cfg, t0)
			if tc.field == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate = %v, New = %v; want valid", err, newErr)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !errors.Is(newErr, ErrConfig) {
				t.Fatalf("Validate = %v, New = %v; want ErrConfig", err, newErr)
			}
			if !strings.Contains(err.Error(), tc.field+":") && !strings.Contains(err.Error(), tc.field+" ") {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// TestLongTicksNeverEarly uses ticks above 2^31 ns, where in-tick offsets
// are rounded up, and checks items still never fire early.
func TestLongTicksNeverEarly(t *testing.T) {
	cfg := Config{Levels: []Level{{Tick: time.Second, Slots: 60}, {Tick: time.Minute, Slots: 60}, {Tick: time.Hour, Slots: 24}}}
	m := newModel(t, cfg)
	for i := int64(0); i < 500; i++ {
		m.add(i*int64(97*time.Minute+13*time.Second+7) + 1)
	}
	for m.w.Len() > 0 {
		wake, _ := m.w.NextWake()
		m.advance(int64(wake.Sub(m.start)))
	}
	m.finish()
}

func TestEntrySize(t *testing.T) {
	type task struct{ a [10]uint64 }
	w := mustNew[task](t, DefaultConfig())
	w.Add(at(time.Second), task{})
	if got := int(entryBytes(w)); got != 80+12 {
		t.Fatalf("entry of an 80-byte item is %d bytes, want 92", got)
	}
}
