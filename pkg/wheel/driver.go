package wheel

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// maxKeptBatch is the largest fire batch whose buffer Run keeps for reuse.
const maxKeptBatch = 4096

// Driver owns a Wheel and fires its items on time, from one goroutine (the
// one calling Run). Add, Cancel and Len may be called from any goroutine,
// before, during or after Run. A mutex guards the wheel; fire callbacks run
// on the Run goroutine outside the mutex, so they may call Add and Cancel.
//
// The Run goroutine sleeps on a single Clock timer until the wheel's next
// non-empty slot (Wheel.NextWake); an empty wheel sleeps without a timer.
// An Add whose item is due before that wake-up nudges the goroutine to
// re-plan. Items never fire before their deadline as read on the Clock.
type Driver[T any] struct {
	clk  Clock
	fire func(T)

	mu      sync.Mutex
	w       *Wheel[T]
	armed   int64 // offset Run sleeps until; MinInt64 while it is not sleeping
	running bool
	parks   int // times Run went to sleep; read by tests

	nudge chan struct{} // capacity 1: an earlier item was added
	stop  chan struct{} // closed by Stop
	once  sync.Once
}

// NewDriver returns a driver for a wheel shaped by cfg, whose time starts
// at clk.Now(). fire is called on the Run goroutine for each item whose
// deadline has passed; it must not block for long, as the next items wait
// for it.
func NewDriver[T any](cfg Config, clk Clock, fire func(v T)) (*Driver[T], error) {
	if clk == nil {
		return nil, fmt.Errorf("%w: clk: must not be nil", ErrConfig)
	}
	if fire == nil {
		return nil, fmt.Errorf("%w: fire: must not be nil", ErrConfig)
	}
	w, err := New[T](cfg, clk.Now())
	if err != nil {
		return nil, err
	}
	return &Driver[T]{
		clk:   clk,
		fire:  fire,
		w:     w,
		armed: math.MinInt64,
		nudge: make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}, nil
}

// Add schedules v to fire at deadline and returns a handle for Cancel. It
// is safe from any goroutine and O(1). Items added after Run has returned
// are kept: the next Run returns them (at once, if Stop was called).
func (d *Driver[T]) Add(deadline time.Time, v T) Handle {
	d.mu.Lock()
	h, wake := d.w.add(deadline, v)
	nudge := wake < d.armed
	if nudge {
		d.armed = wake
	}
	d.mu.Unlock()
	if nudge {
		select {
		case d.nudge <- struct{}{}:
		default:
		}
	}
	return h
}

// Cancel removes the item h names and reports whether it was still
// pending. It is safe from any goroutine.
func (d *Driver[T]) Cancel(h Handle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w.Cancel(h)
}

// Len returns the number of pending items.
func (d *Driver[T]) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w.Len()
}

// Stop makes Run return. It is safe to call more than once and from any
// goroutine.
func (d *Driver[T]) Stop() {
	d.once.Do(func() { close(d.stop) })
}

// Run fires items as they fall due until ctx is done or Stop is called,
// then removes and returns the items that never fired. Only one Run may be
// active at a time; a concurrent second call panics.
func (d *Driver[T]) Run(ctx context.Context) []T {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		panic("wheel: Driver.Run called while already running")
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running = false
		d.armed = math.MinInt64
		d.mu.Unlock()
	}()

	var batch []T
	collect := func(v T) { batch = append(batch, v) }
	for {
		select {
		case <-ctx.Done():
			return d.drain()
		case <-d.stop:
			return d.drain()
		default:
		}
		d.mu.Lock()
		d.w.Advance(d.clk.Now(), collect)
		d.mu.Unlock()
		for i, v := range batch {
			d.fire(v)
			var zero T
			batch[i] = zero
		}
		batch = batch[:0]
		if cap(batch) > maxKeptBatch {
			batch = nil // do not pin the memory of a past burst
		}

		d.mu.Lock()
		wake, ok := d.w.nextWake()
		var wait time.Duration
		if ok {
			if wait = time.Duration(wake) - d.clk.Now().Sub(d.w.start); wait <= 0 {
				d.mu.Unlock()
				continue // already due: advance again without sleeping
			}
		} else {
			wake = math.MaxInt64 // empty: sleep until an Add nudges
		}
		d.armed = wake
		d.parks++
		d.mu.Unlock()
		var timer Timer
		var expired <-chan time.Time
		if ok {
			timer = d.clk.NewTimer(wait)
			expired = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-d.stop:
		case <-d.nudge:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
		d.mu.Lock()
		d.armed = math.MinInt64
		d.mu.Unlock()
	}
}

func (d *Driver[T]) drain() []T {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w.Drain()
}
