package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/axsched/ax/pkg/wheel"
)

func run(s Spec) Result {
	switch s.Kind {
	case KindPending:
		return pending(s)
	case KindLateness:
		return lateness(s)
	case KindIdle:
		return idle(s)
	}
	return Result{Spec: s, Err: fmt.Sprintf("unknown kind %q", s.Kind)}
}

func delays(s Spec) []time.Duration {
	rng := rand.New(rand.NewPCG(s.Seed, 42))
	ds := make([]time.Duration, s.N)
	span := int64(s.MaxDelay - s.MinDelay)
	for i := range ds {
		ds[i] = s.MinDelay + time.Duration(rng.Int64N(span+1))
	}
	return ds
}

func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// loader holds N tasks in one contender until stop is called.
type loader struct {
	base    time.Time
	stamp   bool // record each task's due time (lateness runs only)
	fired   atomic.Int64
	onFire  func(id uint64, due int64)
	started atomic.Int64  // goroutines that reached their sleep
	timers  []*time.Timer // afterfunc: preallocated, so stop can stop them
	keep    any
	stop    func()
}

func (l *loader) fire(id uint64, due int64) {
	if l.onFire != nil {
		l.onFire(id, due)
	}
	l.fired.Add(1)
}

// load inserts the tasks with the given delays and returns the time it
// took per insert.
func (l *loader) load(mode string, ds []time.Duration) (time.Duration, error) {
	l.stop = func() {}
	switch mode {
	case ModeWheel:
		w, err := wheel.New[Task](wheel.DefaultConfig(), l.base)
		if err != nil {
			return 0, err
		}
		l.keep = w
		now := time.Now()
		off := int64(now.Sub(l.base))
		t0 := time.Now()
		for i, d := range ds {
			w.Add(now.Add(d), Task{ID: uint64(i), Due: off + int64(d)})
		}
		return time.Since(t0), nil
	case ModeDriver, ModeDriverNow, ModeDriverFine, ModeEmpty:
		cfg := wheel.DefaultConfig()
		if mode == ModeDriverFine {
			cfg = wheel.FineConfig()
		}
		drv, err := wheel.NewDriver(cfg, wheel.SystemClock(), func(t Task) { l.fire(t.ID, t.Due) })
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { drv.Run(ctx); close(done) }()
		l.keep = drv
		l.stop = func() { cancel(); <-done }
		t0 := time.Now()
		now := t0
		for i, d := range ds {
			if l.stamp || mode == ModeDriverNow {
				now = time.Now()
			}
			drv.Add(now.Add(d), Task{ID: uint64(i), Due: int64(now.Sub(l.base)) + int64(d)})
		}
		return time.Since(t0), nil
	case ModeAfterFunc:
		l.timers = l.timers[:0]
		l.stop = func() {
			for _, t := range l.timers {
				t.Stop()
			}
			clear(l.timers) // release the stopped timers
		}
		t0 := time.Now()
		for i, d := range ds {
			t := &Task{ID: uint64(i)}
			if l.stamp {
				t.Due = int64(time.Since(l.base)) + int64(d)
			}
			l.timers = append(l.timers, time.AfterFunc(d, func() { l.fire(t.ID, t.Due) }))
		}
		return time.Since(t0), nil
	case ModeGoroutine:
		t0 := time.Now()
		for i, d := range ds {
			t := &Task{ID: uint64(i)}
			if l.stamp {
				t.Due = int64(time.Since(l.base)) + int64(d)
			}
			go func() {
				l.started.Add(1)
				time.Sleep(d)
				l.fire(t.ID, t.Due)
			}()
		}
		el := time.Since(t0)
		// Every goroutine must be asleep (its timer allocated) before memory
		// is read.
		for l.started.Load() < int64(len(ds)) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		return el, nil
	case ModeBaseline:
		return 0, nil
	}
	return 0, fmt.Errorf("unknown mode %q", mode)
}

// pending fills a contender with N tasks: the first fill, in a fresh
// process, gives memory per task and the cold insert cost; then the
// contender is emptied and refilled reps times, and the median of those
// fills is the warm insert cost.
func pending(s Spec) Result {
	r := Result{Spec: s}
	ds := delays(s)
	l := &loader{base: time.Now(), timers: make([]*time.Timer, 0, s.N)}
	fill := func() (cpuNs, wallNs float64, err error) {
		c0, err := cpu()
		if err != nil {
			return 0, 0, err
		}
		el, err := l.load(s.Mode, ds)
		if err != nil {
			return 0, 0, err
		}
		c1, err := cpu()
		if err != nil {
			return 0, 0, err
		}
		return float64(c1-c0) / float64(s.N), float64(el) / float64(s.N), nil
	}
	before := inUse()
	cold, _, err := fill()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	after := inUse()
	r.NsPerInsertCold = cold
	r.BytesPerTask = (float64(after)-float64(before))/float64(s.N) - TaskSize
	r.Fired = int(l.fired.Load())
	runtime.KeepAlive(l.keep)
	l.stop()
	l.keep = nil

	r.Reps = min(max(1_000_000/s.N, 3), 5)
	if s.Mode == ModeGoroutine {
		r.Reps = 0 // sleeping goroutines cannot be stopped
	}
	var cpus, walls []float64
	for range r.Reps {
		runtime.GC()
		c, w, err := fill()
		if err != nil {
			r.Err = err.Error()
			return r
		}
		cpus, walls = append(cpus, c), append(walls, w)
		l.stop()
		l.keep = nil
	}
	r.NsPerInsert, r.WallPerInsert = median(cpus), median(walls)
	if r.Reps == 0 {
		r.NsPerInsert = cold
	}
	runtime.KeepAlive(ds)
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func lateness(s Spec) Result {
	r := Result{Spec: s}
	ds := delays(s)
	lat := make([]int64, s.N)
	l := &loader{base: time.Now(), stamp: true}
	all := make(chan struct{})
	var left atomic.Int64
	left.Store(int64(s.N))
	l.onFire = func(id uint64, due int64) {
		lat[id] = int64(time.Since(l.base)) - due
		if left.Add(-1) == 0 {
			close(all)
		}
	}
	if _, err := l.load(s.Mode, ds); err != nil {
		r.Err = err.Error()
		return r
	}
	select {
	case <-all:
	case <-time.After(s.MaxDelay + 30*time.Second):
		r.Err = fmt.Sprintf("only %d of %d fired", s.N-int(left.Load()), s.N)
		return r
	}
	l.stop()
	slices.Sort(lat)
	r.Fired = s.N
	r.P50 = time.Duration(lat[len(lat)/2])
	r.P99 = time.Duration(lat[len(lat)*99/100])
	r.Max = time.Duration(lat[len(lat)-1])
	for _, v := range lat {
		if v < 0 {
			r.Early++
		}
	}
	return r
}

func idle(s Spec) Result {
	r := Result{Spec: s}
	ds := delays(s)
	l := &loader{base: time.Now()}
	if _, err := l.load(s.Mode, ds); err != nil {
		r.Err = err.Error()
		return r
	}
	ds = nil
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	fired0 := l.fired.Load()
	c0, err := cpu()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	time.Sleep(s.Idle)
	c1, err := cpu()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.CPU = c1 - c0
	r.Fired = int(l.fired.Load() - fired0)
	runtime.KeepAlive(l.keep)
	l.stop()
	return r
}

// cpu returns the user+system CPU time of this process.
func cpu() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
