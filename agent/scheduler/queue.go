package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/axsched/ax/agent/store"
)

// numPriorities is the number of job priorities (0..protocol.MaxPriority).
const numPriorities = 10

// item is one triggered attempt waiting for (or held by) a worker. The
// ready queue is bounded (queue.size), so an item may carry its row and
// job spec: the worker then needs no read. Items on the wheels are only
// references (wheelItem).
type item struct {
	id       int64 // execs row
	job      *jobRef
	prio     uint8
	enqueued time.Time // when it entered the ready queue (aging)
	runAt    time.Time // scheduled time (lag)
	// row is the attempt (Spec may be nil: read when it is marked RUNNING).
	row *store.Exec
	// spec is what the worker needs of the job's spec, from the run
	// command the attempt was stored from in this process (nil: the
	// worker decodes row.Spec).
	spec *runSpec
	// started is when it was dispatched (RUNNING).
	started time.Time
	// fenced is set by the scheduler goroutine when the attempt's group
	// lease moves on after it was dispatched (fenceMovedOn) and read by
	// the worker that takes it: one not started yet is then not run.
	fenced atomic.Bool
}

// fifo is a ring of items.
type fifo struct {
	buf        []*item
	head, size int
}

func (f *fifo) push(it *item) {
	if f.size == len(f.buf) {
		n := make([]*item, max(8, 2*len(f.buf)))
		for i := range f.size {
			n[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = n, 0
	}
	f.buf[(f.head+f.size)%len(f.buf)] = it
	f.size++
}

func (f *fifo) peek() *item { return f.buf[f.head] }

func (f *fifo) pop() *item {
	it := f.buf[f.head]
	f.buf[f.head] = nil
	f.head = (f.head + 1) % len(f.buf)
	f.size--
	if f.size == 0 && len(f.buf) > 64 {
		f.buf, f.head = nil, 0
	}
	return it
}

// readyQueue orders runnable items: higher effective priority first, FIFO
// inside a priority. An item's effective priority is its priority plus one
// per agingStep it has waited, so a low-priority item under a steady stream
// of high-priority ones reaches the top after at most
// (MaxPriority)·agingStep and then wins by age. Not safe for concurrent use
// (the scheduler goroutine owns it).
type readyQueue struct {
	q         [numPriorities]fifo
	n         int
	agingStep time.Duration
}

func (r *readyQueue) len() int { return r.n }

func (r *readyQueue) push(it *item) {
	r.q[it.prio].push(it)
	r.n++
}

// effective returns the aged priority of an item at now.
func (r *readyQueue) effective(it *item, now time.Time) int64 {
	return int64(it.prio) + int64(now.Sub(it.enqueued)/r.agingStep)
}

// pop removes the item to run next. Only the head of each priority is a
// candidate (it is the oldest there, so it has the highest effective
// priority of its FIFO); ties go to the item that has waited longest.
func (r *readyQueue) pop(now time.Time) (*item, bool) {
	best := -1
	var bestEff int64
	for p := numPriorities - 1; p >= 0; p-- {
		if r.q[p].size == 0 {
			continue
		}
		h := r.q[p].peek()
		e := r.effective(h, now)
		if best < 0 || e > bestEff || (e == bestEff && h.enqueued.Before(r.q[best].peek().enqueued)) {
			best, bestEff = p, e
		}
	}
	if best < 0 {
		return nil, false
	}
	r.n--
	return r.q[best].pop(), true
}

// remove deletes the item with row id (a cancelled attempt); O(n).
func (r *readyQueue) remove(id int64) (*item, bool) {
	for p := range r.q {
		f := &r.q[p]
		for i := 0; i < f.size; i++ {
			j := (f.head + i) % len(f.buf)
			if f.buf[j].id != id {
				continue
			}
			it := f.buf[j]
			// Shift the rest down by one.
			for k := i; k < f.size-1; k++ {
				f.buf[(f.head+k)%len(f.buf)] = f.buf[(f.head+k+1)%len(f.buf)]
			}
			f.buf[(f.head+f.size-1)%len(f.buf)] = nil
			f.size--
			r.n--
			return it, true
		}
	}
	return nil, false
}
