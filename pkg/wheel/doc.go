// Package wheel is the hierarchical timing wheel of ax: it holds many
// pending items, each due at a deadline, and hands each one back once its
// deadline has passed, at a small and constant cost per item.
//
// # Shape
//
// A wheel is a stack of levels (rings of slots), finest first, plus an
// overflow min-heap. DefaultConfig is 10 ms × 1000 slots, then
// 1 s × 3600 slots; FineConfig is the 1 ms lane, 1 ms × 1000 then
// 1 s × 3600. An item goes into the finest level whose window (the Slots
// ticks starting at the current one) holds its deadline. A deadline beyond
// the top level's window goes into an overflow bucket; each bucket covers
// a whole number of top-level ticks (4 s with a 1 s top tick: the most
// that keeps in-bucket offsets exact in 32 bits) and the buckets are kept
// in a min-heap by time, as Kafka keeps its TimerTaskList buckets in a
// DelayQueue. As time advances, a higher slot is cascaded — its items
// re-placed into finer levels — when its tick begins, and an overflow
// bucket moves into the wheel once all of it fits the top window. Items
// fire from the finest level only.
//
// Deadlines are kept to the nanosecond (rounded up, never down, only when
// a level's Tick or a bucket exceeds 2^32-1 ns). Advance(now) fires exactly
// the items whose deadline is <= now, in order of their finest-level tick;
// items of the same tick fire in any order. The Driver wakes at the end of
// the earliest non-empty finest slot, so an item fires at most one finest
// Tick after its deadline, plus timer and scheduling latency, and never
// before.
//
// # Example
//
// The deterministic core takes time as an argument, so it needs no sleeps:
//
//	start := time.Now()
//	w, err := wheel.New[string](wheel.DefaultConfig(), start)
//	if err != nil {
//		return err
//	}
//	w.Add(start.Add(25*time.Millisecond), "a")
//	h := w.Add(start.Add(2*time.Hour), "b") // beyond 1 h: overflow heap
//	w.Add(start.Add(90*time.Second), "c")   // 1 s level, cascaded later
//	w.Cancel(h)                             // true: "b" will never fire
//	next, _ := w.NextWake()                 // start+30ms: end of a's 10 ms slot
//	w.Advance(next, func(v string) { fmt.Println(v) }) // prints a
//	w.Advance(start.Add(2*time.Minute), func(v string) { fmt.Println(v) }) // prints c
//
// The Driver runs a wheel on the monotonic clock:
//
//	d, err := wheel.NewDriver(wheel.DefaultConfig(), wheel.SystemClock(),
//		func(ref ExecRef) { queue.Push(ref) }) // must not block for long
//	go func() { leftover := d.Run(ctx); persist(leftover) }()
//	h := d.Add(time.Now().Add(30*time.Minute), ref) // from any goroutine
//	d.Cancel(h)
//
// # Cost
//
//   - Add: O(1): one division, a slab allocation (amortised; the slab grows
//     by fixed chunks of 1024 entries and never copies) and a list push.
//     An overflow item also finds its bucket through a 1024-entry
//     direct-mapped cache backed by a map; the first item of a new bucket
//     adds a map insert and an O(log buckets) heap push.
//   - Cancel: O(1) by handle: a generation check, then the item is cleared
//     and its handle invalidated at once. As in Netty's HashedWheelTimer,
//     the entry leaves its list lazily: when the list is next walked
//     (fired, cascaded, moved) or when cancelled entries outnumber half
//     the pending ones (and at least 1024), which triggers an O(pending)
//     compaction — amortised O(1) per Cancel. So cancelled-but-unreclaimed
//     entries never exceed max(1023, pending/2) after a Cancel.
//   - Advance: O(fired + cascaded + reclaimed + slot-bitmap words
//     scanned). Each item is cascaded at most once per level. Empty slots
//     are skipped through per-level occupancy bitmaps, so jumping far
//     ahead is cheap.
//   - NextWake: O(total slots / 64) word tests, with no allocation.
//   - Memory: each pending item costs its own size plus 12 bytes (next,
//     in-tick offset and generation, 4 bytes each, stored as parallel
//     arrays so there is no padding), plus at most one unused 1024-entry
//     chunk. Fixed cost per wheel: 4 bytes + 1 bit per slot and a 4 KB
//     bucket cache (about 23 KB for DefaultConfig); per non-empty overflow
//     bucket about 50 bytes (heap, bucket record, map entry). Freed
//     entries are reused; the slab does not shrink.
//
// # Concurrency
//
// A Wheel is not safe for concurrent use: one goroutine owns it. The fire
// callback given to Advance runs on that goroutine and must not call
// back into the wheel (Add, Cancel and Drain panic if it does); collect
// what fired and act after Advance returns.
//
// A Driver owns its Wheel behind a mutex. Add, Cancel and Len are safe from
// any goroutine; only the goroutine in Run advances the wheel and calls
// fire, outside the mutex, so fire may call Add and Cancel. A slow fire
// delays the items after it, never the callers of Add. The Run goroutine
// sleeps on one timer until the next non-empty slot, so an idle or sparse
// wheel costs no CPU; when Run returns (ctx done or Stop) it hands back
// every item that never fired.
//
// Handles are an index plus a 32-bit generation: a handle of an item that
// fired or was cancelled never cancels another item, unless its entry has
// since been reused 2^31 times.
package wheel
