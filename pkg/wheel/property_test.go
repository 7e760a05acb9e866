package wheel

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestPropertyRandomOps drives random add/cancel/advance sequences through
// the model: every uncancelled item fires exactly once, never early, and
// in finest-tick order across slots.
func TestPropertyRandomOps(t *testing.T) {
	for ci, cfg := range smallConfigs {
		for seed := uint64(0); seed < 100; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			m := newModel(t, cfg)
			lo := cfg.Levels[len(cfg.Levels)-1]
			span := int64(lo.Span())
			tick := int64(cfg.Levels[0].Tick)
			for op := 0; op < 600; op++ {
				switch r := rng.IntN(10); {
				case r < 5:
					var d int64
					switch rng.IntN(4) {
					case 0: // near, often same slot
						d = m.now() + rng.Int64N(3*tick)
					case 1: // anywhere in the wheel
						d = m.now() + rng.Int64N(span)
					case 2: // overflow
						d = m.now() + span + rng.Int64N(4*span)
					default: // in the past
						d = m.now() - rng.Int64N(2*span+1)
					}
					m.add(d)
				case r < 7:
					m.cancel(rng.IntN(len(m.handles)+2) - 1)
				case r < 9:
					m.advance(m.now() + rng.Int64N(span/2+1))
				default:
					if wake, ok := m.w.NextWake(); ok {
						m.advance(int64(wake.Sub(m.start)))
					}
				}
			}
			m.finish()
		}
	}
}

// TestPropertyDrivenByNextWake checks the Driver's contract with the core:
// advancing only to NextWake fires every item no earlier than its deadline
// and no later than the end of its finest slot.
func TestPropertyDrivenByNextWake(t *testing.T) {
	for ci, cfg := range append(smallConfigs, FineConfig()) {
		rng := rand.New(rand.NewPCG(7, uint64(ci)))
		start := time.Unix(0, 0)
		w, err := New[int64](cfg, start)
		if err != nil {
			t.Fatal(err)
		}
		tick := int64(cfg.Levels[0].Tick)
		span := int64(cfg.Levels[len(cfg.Levels)-1].Span())
		const n = 3000
		for i := 0; i < n; i++ {
			w.Add(start.Add(time.Duration(rng.Int64N(3*span))), 0)
		}
		// Values carry their deadline; re-add with them.
		w.Drain()
		for i := 0; i < n; i++ {
			d := rng.Int64N(3 * span)
			w.Add(start.Add(time.Duration(d)), d)
		}
		fired := 0
		for steps := 0; w.Len() > 0; steps++ {
			if steps > 10*n {
				t.Fatalf("config %d: no progress after %d wakes, %d pending", ci, steps, w.Len())
			}
			wake, ok := w.NextWake()
			if !ok {
				t.Fatalf("config %d: NextWake false with %d pending", ci, w.Len())
			}
			now := int64(wake.Sub(start))
			w.Advance(wake, func(d int64) {
				fired++
				if d > now {
					t.Fatalf("config %d: fired early: deadline %d now %d", ci, d, now)
				}
				if end := (d/tick + 1) * tick; now > end {
					t.Fatalf("config %d: fired late: deadline %d now %d slot end %d", ci, d, now, end)
				}
			})
		}
		if fired != n {
			t.Fatalf("config %d: fired %d of %d", ci, fired, n)
		}
	}
}
