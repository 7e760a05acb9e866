package scheduler

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/axsched/ax/pkg/wheel"
)

// wheelItem is what the wheels hold: a reference, never a payload (16 B).
// A run item names its execs row; a periodic fire names its job's ref and
// the plan it belongs to (a stale plan is ignored; the fire time is the
// job's next).
type wheelItem struct {
	id   int64  // execs row of a run item; jobs ref of a periodic fire
	seq  uint32 // low bits of planSeq of a periodic fire; 0 for a run item
	prio uint8
}

func (w wheelItem) periodic() bool { return w.seq != 0 }

// trigger owns the wheels and what fires: it plans each assigned job's
// next fire and the PENDING runs, turns due items into TRIGGERED attempts
// (batched per pass, fires.go) or skipped fires (skips.go), and holds the
// skew and lease checks that stop firing (scheduler goroutine only, but
// refusing).
type trigger struct {
	env  *env
	jobs *jobSet
	runs *runQueue

	normal, fine *wheel.Driver[wheelItem]
	// fireSlots bounds the wheel fires waiting in the mailbox: a wheel
	// blocks (and its due items wait on it) while MaxQueuedFires are
	// queued already.
	fireSlots chan struct{}
	wheelStop chan struct{} // closed when the wheels stop

	held    []wheelItem // runs refused by skew
	pending int         // run items on the wheels
	// fires are the periodic fires waiting for their batch write (fires.go).
	fires []*fireRec
	// skipping are the jobs that may have a skipped run (skips.go).
	skipping []*jobRef

	skewRefusing bool
	refusing     atomic.Bool // skewRefusing, for command appliers
	adopt        bool        // on_skew adopt and over max_skew: plan on controller time
	stopped      bool
}

func newTrigger(e *env, jobs *jobSet, runs *runQueue) (*trigger, error) {
	t := &trigger{env: e, jobs: jobs, runs: runs, fireSlots: make(chan struct{}, MaxQueuedFires), wheelStop: make(chan struct{})}
	var err error
	if t.normal, err = wheel.NewDriver[wheelItem](wheel.DefaultConfig(), e.cfg.Clock, t.onWheel); err != nil {
		return nil, err
	}
	if t.fine, err = wheel.NewDriver[wheelItem](wheel.FineConfig(), e.cfg.Clock, t.onWheel); err != nil {
		return nil, err
	}
	return t, nil
}

// start runs the wheels; stop stops them (an item not fired then is in the
// store, PENDING, or is the job's next fire, and start-up recovery
// handles it).
func (t *trigger) start() (stop func()) {
	wctx, stopWheels := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); t.normal.Run(wctx) }()
	go func() { defer wg.Done(); t.fine.Run(wctx) }()
	return func() {
		stopWheels()
		close(t.wheelStop)
		t.normal.Stop()
		t.fine.Stop()
		wg.Wait()
	}
}

// onWheel queues a due wheel item for the scheduler goroutine, waiting
// while MaxQueuedFires are queued already (or until the wheels stop).
func (t *trigger) onWheel(w wheelItem) {
	select {
	case t.fireSlots <- struct{}{}:
	case <-t.wheelStop:
		return
	}
	t.env.mail.post(wheelFired{w: w})
}
