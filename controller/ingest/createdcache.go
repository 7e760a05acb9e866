package ingest

import (
	"sync"

	"github.com/axsched/ax/controller/execstore"
)

// createdMax bounds createdExecs: past it, the records are forgotten (their
// first reports read them from ax_execs).
const createdMax = 16384

// createdExecs holds the records of executions CreateJob has just written,
// until the first report of each reaches its report lane: the lane takes
// the record from here instead of reading it from ax_execs (a round trip
// and a decode per dispatched execution). A record that changed meanwhile
// (an operator's cancel) fails the lane's compare-and-set, which reads it
// again, as for any record of the lane's own cache.
type createdExecs struct {
	mu sync.Mutex
	m  map[string]execstore.Version
}

// put remembers v, the record just written at v.rev.
func (c *createdExecs) put(v execstore.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= createdMax {
		c.m = make(map[string]execstore.Version, 256)
	}
	c.m[v.Rec.ExecID] = v
}

// take returns and forgets the record of id, if it is held.
func (c *createdExecs) take(id string) (execstore.Version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	if ok {
		delete(c.m, id)
	}
	return v, ok
}

// NoteCreated remembers v, the record of an execution the controller has
// just created (CreateJob: v.Rev is its revision), for the lane that
// applies the execution's first report. Safe for concurrent use.
func (c *Ingest) NoteCreated(v execstore.Version) { c.created.put(v) }
