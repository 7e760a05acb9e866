package jobcache

import (
	"encoding/json"
	"math"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// compact is a live one-shot job's spec as the cache holds it: the
// fields a user writes per job (name, payload, idempotency key, an at
// instant) as they are, the rest interned (handler, agent, group, delay:
// few values shared by many jobs) or as small enums, the policies as
// pointers to one shared copy per value. A cache entry so held takes
// about two thirds of one holding the decoded protocol.Job
// (BenchmarkJobCacheMemory: 406 against 598 bytes a job): 300,000
// delayed one-shots are the case it is for. Get rebuilds the Job
// (expand); toCompact refuses a job it could not rebuild exactly, which
// the cache then holds decoded.
type compact struct {
	name, handler, payload, idem string
	// sched is the value of the schedule's one field: At or Delay ("" for
	// Asap), per schedKind.
	sched         string
	agent, group  string
	retry         *protocol.RetrySpec
	misfire       *protocol.MisfireSpec
	timeout       int64
	priority      int32
	concurrency   int32
	schedKind     uint8
	mode, overlap uint8
	precision     uint8
}

// Schedule kinds of a compact one-shot job.
const (
	schedAsap uint8 = iota
	schedAt
	schedDelay
)

// The values of the enum fields, index = the stored byte.
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
// agents, delays unique per job) are held per job instead.
const maxInterned = 4096

// interner shares one copy of each of a bounded set of values. Its owner
// serializes calls (the cache's lock).
type interner struct {
	strs     map[string]string
	retries  map[protocol.RetrySpec]*protocol.RetrySpec
	misfires map[protocol.MisfireSpec]*protocol.MisfireSpec
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, retries: map[protocol.RetrySpec]*protocol.RetrySpec{},
		misfires: map[protocol.MisfireSpec]*protocol.MisfireSpec{}}
}

func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in.strs[s]; ok {
		return v
	}
	if len(in.strs) < maxInterned {
		in.strs[s] = s
	}
	return s
}

// internPtr returns the shared copy of v in table, adding one while the
// table is below maxInterned (past it, a copy of v's own).
func internPtr[V comparable](table map[V]*V, v V) *V {
	if p, ok := table[v]; ok {
		return p
	}
	p := &v
	if len(table) < maxInterned {
		table[v] = p
	}
	return p
}

// toCompact returns the compact form of one-shot job j, or false when
// expand could not rebuild j exactly (a field outside the enums or the
// int32 range, a schedule with more than its one field); in interns the
// shared values. ID, Generation, CreatedAt and Paused are kept by the
// cache entry.
func toCompact(j *protocol.Job, in *interner) (*compact, bool) {
	c := &compact{name: j.Name, handler: in.str(j.Handler), payload: string(j.Payload), idem: j.IdempotencyKey,
		agent: in.str(j.Target.Agent), group: in.str(j.Target.Group), timeout: int64(j.Timeout)}
	s := j.Schedule
	switch {
	case s.Every != "" || s.Cron != "" || s.Timezone != "":
		return nil, false
	case s.Asap && s.At == "" && s.Delay == "":
		c.schedKind = schedAsap
	case !s.Asap && s.At != "" && s.Delay == "":
		c.schedKind, c.sched = schedAt, s.At
	case !s.Asap && s.At == "" && s.Delay != "":
		c.schedKind, c.sched = schedDelay, in.str(s.Delay)
	default:
		return nil, false
	}
	if j.Priority < math.MinInt32 || j.Priority > math.MaxInt32 || j.Concurrency < math.MinInt32 || j.Concurrency > math.MaxInt32 {
		return nil, false
	}
	c.priority, c.concurrency = int32(j.Priority), int32(j.Concurrency)
	var ok1, ok2, ok3 bool
	c.mode, ok1 = enumOf(modes[:], j.Target.Mode)
	c.overlap, ok2 = enumOf(overlaps[:], j.Overlap)
	c.precision, ok3 = enumOf(precisions[:], j.Precision)
	if !ok1 || !ok2 || !ok3 {
		return nil, false
	}
	if j.Retry != (protocol.RetrySpec{}) {
		c.retry = internPtr(in.retries, j.Retry)
	}
	if j.Misfire != (protocol.MisfireSpec{}) {
		c.misfire = internPtr(in.misfires, j.Misfire)
	}
	return c, true
}

// expand rebuilds the job of id held as c and entry cj.
func (c *compact) expand(id string, cj cachedJob) protocol.Job {
	j := protocol.Job{ID: id, Name: c.name, Handler: c.handler, IdempotencyKey: c.idem,
		Target:   protocol.Target{Agent: c.agent, Group: c.group, Mode: modes[c.mode]},
		Priority: int(c.priority), Timeout: protocol.Duration(c.timeout), Concurrency: int(c.concurrency),
		Overlap: overlaps[c.overlap], Precision: precisions[c.precision],
		Paused: cj.flags&flagPaused != 0, Generation: cj.gen}
	if c.payload != "" {
		j.Payload = json.RawMessage(c.payload)
	}
	switch c.schedKind {
	case schedAsap:
		j.Schedule = schedule.Spec{Asap: true}
	case schedAt:
		j.Schedule = schedule.Spec{At: c.sched}
	case schedDelay:
		j.Schedule = schedule.Spec{Delay: c.sched}
	}
	if c.retry != nil {
		j.Retry = *c.retry
	}
	if c.misfire != nil {
		j.Misfire = *c.misfire
	}
	if cj.at != 0 {
		j.CreatedAt = time.Unix(0, cj.at).UTC()
	}
	return j
}
