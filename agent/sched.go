package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
	"github.com/axsched/ax/pkg/wheel"
)

// Cancel causes of a running attempt.
var (
	errCancelled = errors.New("cancelled by command")
	errShutdown  = errors.New("agent shutting down")
)

// jobRef is the scheduler's record of one job id: the assigned job (if
// any) and the counts that enforce overlap and concurrency. Only the
// scheduler goroutine touches it.
//
// active counts the job's attempts that are TRIGGERED or RUNNING in the
// store (or being written so): in the ready queue, waiting for the job's
// concurrency, running, and also those left in SQLite while the ready
// queue is full (spilled). It is taken from the store at start (recover)
// and changed only where an attempt enters or leaves those states, never
// where it moves between memory and SQLite; overlap=forbid compares it
// with the job's concurrency.
type jobRef struct {
	id       string
	assigned *assignedJob
	limit    int // per-agent concurrency
	active   int // TRIGGERED or RUNNING attempts, spilled ones included
	running  int // dispatched to a worker
	inReady  int // in the ready queue
	waiting  fifo
	// parked: attempts of the job were left in SQLite because as many as
	// it may run at once already wait for it in memory (see accept).
	parked bool
	// skip is the job's run of skipped fires not written yet (skips.go).
	skip *skipRun
}

// assignedJob is a periodic job planned on a wheel. The payload is not kept.
type assignedJob struct {
	ref        int64
	job        protocol.Job
	sched      schedule.Schedule
	shard      *protocol.ShardSlot
	epoch      uint64
	leaseUntil time.Time // agent monotonic clock; zero: no lease
	lapseSaid  bool      // "lease lapsed" logged since the last grant
	lastFire   time.Time
	planSeq    uint64
	next       time.Time
}

func (j *jobRef) fireable() bool {
	return j.assigned != nil && !j.assigned.job.Paused
}

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

type running struct {
	it     *item
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// workUnit is what a worker gets.
type workUnit struct {
	it  *item
	ctx context.Context
}

// scheduler owns jobs, leases, the ready queue and worker slots.
type scheduler struct {
	a   *Agent
	log *slog.Logger

	mu     sync.Mutex
	inbox  []func()
	notify chan struct{}
	// urgent are functions run before anything in inbox (heartbeat
	// replies: lease renewals); nUrgent is len(urgent), read between
	// inbox items without the lock.
	urgent  []func()
	nUrgent atomic.Int32
	// fireSlots bounds the wheel fires waiting in inbox: a wheel blocks
	// (and its due items wait on it) while maxQueuedFires are queued.
	fireSlots chan struct{}
	wheelStop chan struct{} // closed when the wheels stop
	// view is what heartbeats and registrations read (hbview.go).
	view atomic.Pointer[hbView]

	normal, fine *wheel.Driver[wheelItem]

	jobs    map[string]*jobRef
	byRef   map[int64]*jobRef // assigned jobs by store ref
	ready   readyQueue
	inMem   map[int64]*item
	mem     int // items in ready + waiting
	spilled bool
	running map[int64]running
	held    []wheelItem // runs refused by skew
	pending int         // run items on the wheels
	// fenced are the PENDING runs fired under a group lease (epoch > 0):
	// they run only while this agent holds the job's lease at that epoch.
	fenced map[int64]runFence
	// fires are the periodic fires waiting for their batch write (fires.go).
	fires []*fireRec
	// skipping are the jobs that may have a skipped run (skips.go).
	skipping []*jobRef

	work      chan workUnit
	starting  int // dispatched batches whose RUNNING write is not durable yet
	workers   int
	busy      int
	slowStart bool

	skewRefusing bool
	refusing     atomic.Bool // skewRefusing, for command appliers
	adopt        bool        // on_skew adopt and over max_skew: plan on controller time

	lags      [1024]time.Duration
	lagN      int
	stopped   bool
	wg        sync.WaitGroup
	runCtx    context.Context
	lastTick  time.Time
	lastPrune time.Time

	// reloadFrom: every TRIGGERED row with a lower or equal id is in
	// memory, so reload scans after it (0 at start: recovery spills
	// without ids; math.MaxInt64: nothing left in SQLite since).
	reloadFrom int64
}

func newScheduler(a *Agent) *scheduler {
	s := &scheduler{a: a, log: a.log, notify: make(chan struct{}, 1), jobs: map[string]*jobRef{}, byRef: map[int64]*jobRef{},
		inMem: map[int64]*item{}, running: map[int64]running{}, workers: a.cfg.Workers, fenced: map[int64]runFence{},
		work: make(chan workUnit, a.cfg.Workers), fireSlots: make(chan struct{}, maxQueuedFires), wheelStop: make(chan struct{})}
	s.view.Store(&hbView{})
	s.ready.agingStep = a.cfg.Queue.AgingStep
	wc := a.clk
	var err error
	if s.normal, err = wheel.NewDriver[wheelItem](wheel.DefaultConfig(), wc, s.onWheel); err != nil {
		panic(err) // static config
	}
	if s.fine, err = wheel.NewDriver[wheelItem](wheel.FineConfig(), wc, s.onWheel); err != nil {
		panic(err)
	}
	return s
}

// post runs fn on the scheduler goroutine. It never blocks.
func (s *scheduler) post(fn func()) {
	s.mu.Lock()
	s.inbox = append(s.inbox, fn)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// call runs fn on the scheduler goroutine and waits (false if stopped).
func (s *scheduler) call(ctx context.Context, fn func()) bool {
	done := make(chan struct{})
	s.post(func() { fn(); close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// maxQueuedFires bounds the wheel fires waiting for the scheduler
// goroutine. Beyond it the wheels wait (backpressure): due items stay on
// them and fire late, none is dropped (a periodic job has one item on a
// wheel at a time, and each fire plans the next from its scheduled time,
// so every fire time is still recorded, late).
const maxQueuedFires = 1024

// onWheel queues a wheel item for the scheduler goroutine, waiting while
// maxQueuedFires are queued already (or until the wheels stop: an item
// not fired then is in the store, PENDING, or is the job's next fire, and
// start-up recovery handles it).
func (s *scheduler) onWheel(w wheelItem) {
	select {
	case s.fireSlots <- struct{}{}:
	case <-s.wheelStop:
		return
	}
	s.post(func() { <-s.fireSlots; s.fire(w) })
}

// postUrgent runs fn on the scheduler goroutine before the functions
// waiting in the inbox. It never blocks.
func (s *scheduler) postUrgent(fn func()) {
	s.mu.Lock()
	s.urgent = append(s.urgent, fn)
	s.nUrgent.Store(int32(len(s.urgent)))
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// runUrgent runs the urgent functions posted so far and publishes the
// heartbeat view they may have changed.
func (s *scheduler) runUrgent() {
	s.mu.Lock()
	fns := s.urgent
	s.urgent = nil
	s.nUrgent.Store(0)
	s.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	for _, fn := range fns {
		fn()
	}
	s.publishView()
}

func (s *scheduler) job(id string) *jobRef {
	j := s.jobs[id]
	if j == nil {
		j = &jobRef{id: id, limit: 1}
		s.jobs[id] = j
	}
	return j
}

func (s *scheduler) gc(j *jobRef) {
	if j.assigned == nil && j.active == 0 && j.waiting.size == 0 {
		delete(s.jobs, j.id)
	}
}

// run is the scheduler goroutine.
func (s *scheduler) run(ctx context.Context) {
	s.runCtx = ctx
	wctx, stopWheels := context.WithCancel(context.Background())
	var wwg sync.WaitGroup
	wwg.Add(2)
	go func() { defer wwg.Done(); s.normal.Run(wctx) }()
	go func() { defer wwg.Done(); s.fine.Run(wctx) }()
	for range s.workers {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.a.worker(s.work) }()
	}
	tick := s.a.clk.NewTimer(time.Second)
	s.lastTick = s.a.clk.Now()
	s.publishView()
	s.pump()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-s.notify:
			s.drainBatch(ctx)
			s.pump()
		case <-tick.C():
			s.onTick()
			tick.Reset(time.Second)
		}
	}
	tick.Stop()
	// Stop triggering; the skipped runs and fires counted so far are
	// written.
	s.flushSkips()
	s.flushFires()
	s.stopped = true
	stopWheels()
	close(s.wheelStop)
	s.normal.Stop()
	s.fine.Stop()
	wwg.Wait()
	s.shutdown()
}

// drainBatch runs the functions posted so far, not those they or others
// post meanwhile (the notify channel is set again for them), and stops
// early when ctx is done, leaving the rest in the inbox. When fires come
// faster than the store takes their writes, the inbox never empties: the
// loop must still see a stop, and its timer.
func (s *scheduler) drainBatch(ctx context.Context) {
	s.runUrgent()
	s.mu.Lock()
	batch := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for i, fn := range batch {
		if s.nUrgent.Load() > 0 {
			s.runUrgent()
		}
		if ctx.Err() != nil {
			s.mu.Lock()
			s.inbox = append(batch[i:len(batch):len(batch)], s.inbox...)
			s.mu.Unlock()
			return
		}
		fn()
	}
	s.mu.Lock()
	more := len(s.inbox) > 0 || len(s.urgent) > 0
	s.mu.Unlock()
	if more {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// drainInbox runs posted functions until the inbox is empty.
func (s *scheduler) drainInbox() {
	for {
		s.runUrgent()
		s.mu.Lock()
		batch := s.inbox
		s.inbox = nil
		s.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, fn := range batch {
			fn()
		}
	}
}

// shutdown gives running handlers the grace period, then cancels them.
func (s *scheduler) shutdown() {
	// Batches being marked RUNNING still hand their items to workers.
	for s.starting > 0 {
		<-s.notify
		s.drainInbox()
	}
	close(s.work)
	grace := s.a.clk.NewTimer(s.a.cfg.Shutdown.Grace)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			grace.Stop()
			// Let the last finishes' callbacks land (they only post).
			s.drainInbox()
			return
		case <-s.notify:
			s.drainInbox()
		case <-grace.C():
			s.log.Warn("shutdown grace over; cancelling running handlers", "running", len(s.running))
			for _, r := range s.running {
				r.cancel(errShutdown)
			}
		}
	}
}

// onTick detects wall-clock jumps: the wall clock and the monotonic clock
// diverging by more than clock.jump_threshold re-plans every schedule.
func (s *scheduler) onTick() {
	now := s.a.clk.Now()
	s.publishView()
	s.flushSkips()
	s.log.Debug("scheduler", "ready", s.ready.len(), "mem", s.mem, "in_mem", len(s.inMem), "spilled", s.spilled,
		"busy", s.busy, "running", len(s.running), "jobs", len(s.jobs), "pending", s.pending)
	if s.lastPrune.IsZero() || now.Sub(s.lastPrune) >= s.a.cfg.Store.PruneInterval {
		s.lastPrune = now
		s.a.prune(now)
	}
	mono := now.Sub(s.lastTick)
	wall := now.Round(0).Sub(s.lastTick.Round(0))
	s.lastTick = now
	if d := wall - mono; d > s.a.cfg.Clock.JumpThreshold || -d > s.a.cfg.Clock.JumpThreshold {
		s.log.Warn("wall clock jumped; re-planning schedules", "jump", d)
		s.replanAll(true)
	}
}
