package wheel

import "math"

// overflow holds items whose deadline lies beyond the top level's window.
// Like Kafka's DelayQueue of bucket lists, items are grouped into buckets,
// each covering span nanoseconds (a whole number of top-level ticks, at
// most 2^32-1 ns so in-bucket offsets stay exact), and the buckets form a
// min-heap keyed by bucket number: an item costs no memory beyond its slab
// entry, and adding to an existing bucket is a map lookup. A bucket moves
// into the wheel, whole, once all its ticks are inside the top window.
type overflow struct {
	span  int64 // nanoseconds per bucket
	ticks int64 // top-level ticks per bucket
	unit  int64 // nanoseconds per unit of entry off
	b     []bucket
	free  []uint32
	heap  []uint32 // bucket ids, min-heap on b[id].key
	byKey map[int64]uint32
	// cache maps key mod cacheSize to the bucket id last used for a key
	// with that residue, so most adds skip the map. Hits are verified.
	cache [cacheSize]uint32
}

const cacheSize = 1024

type bucket struct {
	key  int64  // deadline / span of every item in the bucket
	head uint32 // first entry, nilIdx if none
	pos  int32  // index in heap; -1 while the bucket is free
}

func newOverflow(top level) overflow {
	ticks := int64(1)
	if top.tick < math.MaxUint32 {
		ticks = min(math.MaxUint32/top.tick, top.n)
	}
	span := ticks * top.tick
	unit := int64(1)
	if span > math.MaxUint32 {
		unit = span>>32 + 1
	}
	o := overflow{span: span, ticks: ticks, unit: unit}
	for i := range o.cache {
		o.cache[i] = nilIdx
	}
	return o
}

func (o *overflow) len() int { return len(o.heap) }

// keyOf returns the bucket number of deadline d and d's encoded offset in
// it; decoding (deadlineOf) never yields less than d.
func (o *overflow) keyOf(d int64) (int64, uint32) {
	k := d / o.span
	r := d - k*o.span
	if o.unit == 1 {
		return k, uint32(r)
	}
	return k, uint32((r + o.unit - 1) / o.unit)
}

func (o *overflow) deadlineOf(key int64, off uint32) int64 {
	return key*o.span + int64(off)*o.unit
}

// boundary returns the offset at which bucket key fits the top window:
// when the top level's current tick reaches (key+1)*ticks - slots.
func (o *overflow) boundary(key int64, top *level) int64 {
	return ((key+1)*o.ticks - top.n) * top.tick
}

// get returns the bucket for key, creating it if needed.
func (o *overflow) get(key int64) uint32 {
	slot := &o.cache[uint64(key)%cacheSize]
	if id := *slot; id != nilIdx && o.b[id].key == key && o.b[id].pos >= 0 {
		return id
	}
	if id, ok := o.byKey[key]; ok {
		*slot = id
		return id
	}
	var id uint32
	if n := len(o.free); n > 0 {
		id = o.free[n-1]
		o.free = o.free[:n-1]
	} else {
		id = uint32(len(o.b))
		o.b = append(o.b, bucket{})
	}
	o.b[id] = bucket{key: key, head: nilIdx, pos: int32(len(o.heap))}
	o.heap = append(o.heap, id)
	o.up(len(o.heap) - 1)
	if o.byKey == nil {
		o.byKey = make(map[int64]uint32)
	}
	o.byKey[key] = id
	*slot = id
	return id
}

// min returns the bucket with the smallest key.
func (o *overflow) min() (key int64, id uint32, ok bool) {
	if len(o.heap) == 0 {
		return 0, 0, false
	}
	id = o.heap[0]
	return o.b[id].key, id, true
}

// remove deletes bucket id from the heap and frees it, returning the head
// of its list for the caller to deal with.
func (o *overflow) remove(id uint32) uint32 {
	head := o.b[id].head
	pos := int(o.b[id].pos)
	last := len(o.heap) - 1
	if pos != last {
		o.swap(pos, last)
	}
	o.heap = o.heap[:last]
	if pos != last && !o.up(pos) {
		o.down(pos)
	}
	delete(o.byKey, o.b[id].key)
	o.b[id] = bucket{head: nilIdx, pos: -1}
	o.free = append(o.free, id)
	return head
}

func (o *overflow) less(i, j int) bool { return o.b[o.heap[i]].key < o.b[o.heap[j]].key }

func (o *overflow) swap(i, j int) {
	o.heap[i], o.heap[j] = o.heap[j], o.heap[i]
	o.b[o.heap[i]].pos = int32(i)
	o.b[o.heap[j]].pos = int32(j)
}

func (o *overflow) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !o.less(i, p) {
			break
		}
		o.swap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (o *overflow) down(i int) {
	n := len(o.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && o.less(r, l) {
			m = r
		}
		if !o.less(m, i) {
			return
		}
		o.swap(i, m)
		i = m
	}
}
