package wheel

// The slab stores every pending item inline, in fixed-size chunks so that
// growth never copies entries and never leaves more than one chunk unused.
// An entry costs the item's own size plus 12 bytes of metadata (next, off,
// gen), kept in a parallel array so that no padding is added whatever T is.

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1

	// nilIdx ends a list.
	nilIdx = ^uint32(0)
	// maxEntries bounds slab indices below nilIdx.
	maxEntries = nilIdx
)

// chunk holds chunkSize entries: v[j] is entry j's item and m[j] its
// metadata. The two arrays are separate allocations so that each is a
// whole number of pages or an exact size class (1024 items of a size that
// is a multiple of 8 fill whole 8 KB pages; 1024 metas are 12 KB).
type chunk[T any] struct {
	v *[chunkSize]T
	m *[chunkSize]meta
}

// meta is an entry's metadata. next links the entry into a slot list, an
// overflow bucket list or the free list; off is its deadline within the
// current tick of its list, in units of that list's level; gen is its
// generation: odd while the item is pending, even once it fired or was
// cancelled. A cancelled entry stays in its list, dead, until the list is
// next walked (or compacted).
type meta struct {
	next uint32
	off  uint32
	gen  uint32
}

type slab[T any] struct {
	chunks []chunk[T]
	n      uint32 // entries ever handed out (high-water mark)
	free   uint32 // head of the free list, linked through next
}

// meta returns the metadata of entry i.
func (s *slab[T]) meta(i uint32) *meta {
	return &s.chunks[i>>chunkBits].m[i&chunkMask]
}

func (s *slab[T]) next(i uint32) uint32 { return s.meta(i).next }

func (s *slab[T]) live(i uint32) bool { return s.meta(i).gen&1 == 1 }

// alloc stores v in an unused entry, marks it pending and returns its
// index and generation.
func (s *slab[T]) alloc(v T) (uint32, uint32) {
	i := s.free
	if i != nilIdx {
		s.free = s.next(i)
	} else {
		if s.n >= maxEntries {
			panic("wheel: more than 2^32-1 pending items")
		}
		i = s.n
		if int(i>>chunkBits) == len(s.chunks) {
			s.chunks = append(s.chunks, chunk[T]{v: new([chunkSize]T), m: new([chunkSize]meta)})
		}
		s.n++
	}
	s.chunks[i>>chunkBits].v[i&chunkMask] = v
	m := s.meta(i)
	m.gen++
	return i, m.gen
}

// kill marks a pending entry dead: its handles stop matching and its item
// is cleared, but it stays in its list until reclaim.
func (s *slab[T]) kill(i uint32) {
	var zero T
	s.chunks[i>>chunkBits].v[i&chunkMask] = zero
	s.meta(i).gen++
}

// take removes the item of a pending entry, frees the entry and returns
// the item.
func (s *slab[T]) take(i uint32) T {
	p := &s.chunks[i>>chunkBits].v[i&chunkMask]
	v := *p
	var zero T
	*p = zero
	s.meta(i).gen++
	s.reclaim(i)
	return v
}

// reclaim puts an entry that is no longer pending on the free list.
func (s *slab[T]) reclaim(i uint32) {
	s.meta(i).next = s.free
	s.free = i
}

// Handle identifies an item added to a Wheel or Driver, for Cancel. It packs
// the slab index (low 32 bits) and the entry's generation (high 32 bits,
// always odd). The zero Handle is never returned by Add.
type Handle uint64

func makeHandle(i, gen uint32) Handle { return Handle(uint64(gen)<<32 | uint64(i)) }

func (h Handle) index() uint32 { return uint32(h) }
func (h Handle) gen() uint32   { return uint32(h >> 32) }
