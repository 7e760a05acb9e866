package jobcache

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// A live one-shot job's spec is held by the cache as one immutable string
// of bytes, its compact form: the fields a user writes per job (name,
// payload, idempotency key, an at instant) as they are, each behind its
// length; the values few and shared by many jobs (handler, agent, group,
// delay, the retry and misfire specs) as indices into the cache's intern
// tables; the enums packed into one byte; the numbers as varints. A
// cache entry so held takes under half of one holding the decoded
// protocol.Job (BenchmarkJobCacheMemory: 289 against 609 bytes a job,
// the map entry and the id included; 406 when the form was a struct of
// strings and pointers): 300,000 delayed one-shots are the case it is
// for. Get rebuilds the Job (expand); toCompact refuses a
// job it could not rebuild exactly, which the cache then holds decoded.
//
// The layout, in order:
//
//	byte 0     schedule kind | mode<<2 | overlap<<4 | precision<<6
//	byte 1     has retry (bit 0), has misfire (bit 1)
//	name       str          payload  str        idem  str
//	handler    istr         schedule str (at) or istr (delay), none (asap)
//	agent      istr         group    istr
//	retry      uvarint index (if present)   misfire  uvarint index (if present)
//	timeout, priority, concurrency   varints
//
// A str is a uvarint length and the bytes. An istr is a uvarint k: 0 is
// "", 1 is a str that follows (an intern table full), k ≥ 2 is the
// table's string k-2.

// Schedule kinds of a compact one-shot job.
const (
	schedAsap uint8 = iota
	schedAt
	schedDelay
)

// Bits of a compact form's second byte.
const (
	hasRetry uint8 = 1 << iota
	hasMisfire
)

// The values of the enum fields, index = the stored bits.
var (
	modes      = [...]string{"", protocol.ModeAny, protocol.ModeAll}
	overlaps   = [...]string{"", protocol.OverlapForbid, protocol.OverlapQueue, protocol.OverlapAllow}
	precisions = [...]string{"", protocol.PrecisionNormal, protocol.PrecisionFine}
)

// enumOf returns the index of v in values.
func enumOf(values []string, v string) (uint8, bool) {
	for i, s := range values {
		if s == v {
			return uint8(i), true
		}
	}
	return 0, false
}

// maxInterned bounds each intern table: values past it (a fleet of more
// agents, delays unique per job) are held per job instead, or the job
// decoded (a retry or misfire spec).
const maxInterned = 4096

// interner numbers each of a bounded set of values, so that a compact
// form holds the index. Its owner serializes its calls (the cache's
// write lock); the tables only grow, so a snapshot taken under the read
// lock (tables) stays valid for the indices it covers after the lock is
// released.
type interner struct {
	strIdx     map[string]uint64
	retryIdx   map[protocol.RetrySpec]uint64
	misfireIdx map[protocol.MisfireSpec]uint64
	tab        tables
}

// tables are an interner's values, index = the number a compact form
// holds.
type tables struct {
	strs     []string
	retries  []protocol.RetrySpec
	misfires []protocol.MisfireSpec
}

func newInterner() *interner {
	return &interner{strIdx: map[string]uint64{}, retryIdx: map[protocol.RetrySpec]uint64{},
		misfireIdx: map[protocol.MisfireSpec]uint64{}}
}

// intern returns the index of v in table (through idx), adding it while
// the table is below maxInterned; false when it is full without v.
func intern[V comparable](idx map[V]uint64, table *[]V, v V) (uint64, bool) {
	if i, ok := idx[v]; ok {
		return i, true
	}
	if len(*table) >= maxInterned {
		return 0, false
	}
	i := uint64(len(*table))
	*table = append(*table, v)
	idx[v] = i
	return i, true
}

// appendStr appends s as a str.
func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendIstr appends s as an istr, interning it in in.
func (in *interner) appendIstr(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	if i, ok := intern(in.strIdx, &in.tab.strs, s); ok {
		return binary.AppendUvarint(b, i+2)
	}
	return appendStr(append(b, 1), s)
}

// toCompact appends the compact form of one-shot job j to b[:0] (a
// buffer reused), or returns false when expand could not rebuild j
// exactly (a field outside the enums, a schedule with more than its one
// field, a retry or misfire spec past a full table); in interns the
// shared values. ID, Generation, CreatedAt and Paused are kept by the
// cache entry.
func toCompact(b []byte, j *protocol.Job, in *interner) ([]byte, bool) {
	var kind uint8
	s := j.Schedule
	switch {
	case s.Every != "" || s.Cron != "" || s.Timezone != "":
		return b, false
	case s.Asap && s.At == "" && s.Delay == "":
		kind = schedAsap
	case !s.Asap && s.At != "" && s.Delay == "":
		kind = schedAt
	case !s.Asap && s.At == "" && s.Delay != "":
		kind = schedDelay
	default:
		return b, false
	}
	mode, ok1 := enumOf(modes[:], j.Target.Mode)
	overlap, ok2 := enumOf(overlaps[:], j.Overlap)
	precision, ok3 := enumOf(precisions[:], j.Precision)
	if !ok1 || !ok2 || !ok3 {
		return b, false
	}
	var flags uint8
	var ri, mi uint64
	if j.Retry != (protocol.RetrySpec{}) {
		i, ok := intern(in.retryIdx, &in.tab.retries, j.Retry)
		if !ok {
			return b, false
		}
		flags, ri = flags|hasRetry, i
	}
	if j.Misfire != (protocol.MisfireSpec{}) {
		i, ok := intern(in.misfireIdx, &in.tab.misfires, j.Misfire)
		if !ok {
			return b, false
		}
		flags, mi = flags|hasMisfire, i
	}
	b = append(b[:0], kind|mode<<2|overlap<<4|precision<<6, flags)
	b = appendStr(b, j.Name)
	b = appendStr(b, string(j.Payload))
	b = appendStr(b, j.IdempotencyKey)
	b = in.appendIstr(b, j.Handler)
	switch kind {
	case schedAt:
		b = appendStr(b, s.At)
	case schedDelay:
		b = in.appendIstr(b, s.Delay)
	}
	b = in.appendIstr(b, j.Target.Agent)
	b = in.appendIstr(b, j.Target.Group)
	if flags&hasRetry != 0 {
		b = binary.AppendUvarint(b, ri)
	}
	if flags&hasMisfire != 0 {
		b = binary.AppendUvarint(b, mi)
	}
	b = binary.AppendVarint(b, int64(j.Timeout))
	b = binary.AppendVarint(b, int64(j.Priority))
	b = binary.AppendVarint(b, int64(j.Concurrency))
	return b, true
}

// reader walks a compact form. The form was written by toCompact in
// this process, so a read past its end is a bug: it panics.
type reader struct {
	s   string
	tab tables
}

func (r *reader) uvarint() uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		c := r.s[0]
		r.s = r.s[1:]
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) str() string {
	n := r.uvarint()
	v := r.s[:n]
	r.s = r.s[n:]
	return v
}

func (r *reader) istr() string {
	switch k := r.uvarint(); k {
	case 0:
		return ""
	case 1:
		return r.str()
	default:
		return r.tab.strs[k-2]
	}
}

// expand rebuilds the job of id held as compact form s in entry cj; tab
// is the cache's intern tables (a snapshot covering s).
func expand(s string, tab tables, id string, cj cachedJob) protocol.Job {
	r := reader{s: s[2:], tab: tab}
	enums, flags := s[0], s[1]
	j := protocol.Job{ID: id, Paused: cj.flags&flagPaused != 0, Generation: cj.gen}
	j.Target.Mode = modes[enums>>2&3]
	j.Overlap = overlaps[enums>>4&3]
	j.Precision = precisions[enums>>6&3]
	j.Name = r.str()
	if p := r.str(); p != "" {
		j.Payload = json.RawMessage(p)
	}
	j.IdempotencyKey = r.str()
	j.Handler = r.istr()
	switch enums & 3 {
	case schedAsap:
		j.Schedule = schedule.Spec{Asap: true}
	case schedAt:
		j.Schedule = schedule.Spec{At: r.str()}
	case schedDelay:
		j.Schedule = schedule.Spec{Delay: r.istr()}
	}
	j.Target.Agent = r.istr()
	j.Target.Group = r.istr()
	if flags&hasRetry != 0 {
		j.Retry = tab.retries[r.uvarint()]
	}
	if flags&hasMisfire != 0 {
		j.Misfire = tab.misfires[r.uvarint()]
	}
	j.Timeout = protocol.Duration(r.varint())
	j.Priority = int(r.varint())
	j.Concurrency = int(r.varint())
	if cj.at != 0 {
		j.CreatedAt = time.Unix(0, cj.at).UTC()
	}
	return j
}
