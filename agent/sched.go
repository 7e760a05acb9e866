package agent

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/axsched/ax/agent/store"
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
type jobRef struct {
	id       string
	assigned *assignedJob
	limit    int // per-agent concurrency
	active   int // triggered, not finished (queued, spilled, running)
	running  int // dispatched to a worker
	inReady  int // in the ready queue
	waiting  fifo
	refs     int // pending run items on the wheels
}

// assignedJob is a periodic job planned on a wheel. The payload is not kept.
type assignedJob struct {
	ref        int64
	job        protocol.Job
	sched      schedule.Schedule
	shard      *protocol.ShardSlot
	epoch      uint64
	leaseUntil time.Time // agent monotonic clock; zero: no lease
	lastFire   time.Time
	planSeq    uint64
	next       time.Time
}

func (j *jobRef) fireable() bool {
	return j.assigned != nil && !j.assigned.job.Paused
}

// wheelItem is what the wheels hold: a reference, never a payload.
type wheelItem struct {
	job  *jobRef
	id   int64  // execs row of a run item; 0 for a periodic fire
	seq  uint64 // planSeq of a periodic fire
	at   time.Time
	prio uint8
}

type running struct {
	it     *item
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

	normal, fine *wheel.Driver[wheelItem]

	jobs    map[string]*jobRef
	ready   readyQueue
	inMem   map[int64]*item
	mem     int // items in ready + waiting
	spilled bool
	running map[int64]running
	held    []wheelItem // runs refused by skew
	pending int         // run items on the wheels

	work      chan workUnit
	workers   int
	busy      int
	slowStart bool

	skewRefusing bool
	adopt        bool // on_skew adopt and over max_skew: plan on controller time

	lags     [1024]time.Duration
	lagN     int
	stopped  bool
	wg       sync.WaitGroup
	runCtx   context.Context
	lastTick time.Time
}

func newScheduler(a *Agent) *scheduler {
	s := &scheduler{a: a, log: a.log, notify: make(chan struct{}, 1), jobs: map[string]*jobRef{},
		inMem: map[int64]*item{}, running: map[int64]running{}, workers: a.cfg.Workers,
		work: make(chan workUnit, a.cfg.Workers)}
	s.ready.agingStep = a.cfg.Queue.AgingStep
	wc := wheelClock{a.clk}
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

func (s *scheduler) onWheel(w wheelItem) { s.post(func() { s.fire(w) }) }

func (s *scheduler) job(id string) *jobRef {
	j := s.jobs[id]
	if j == nil {
		j = &jobRef{id: id, limit: 1}
		s.jobs[id] = j
	}
	return j
}

func (s *scheduler) gc(j *jobRef) {
	if j.assigned == nil && j.active == 0 && j.refs == 0 && j.waiting.size == 0 {
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
	s.pump()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-s.notify:
			s.drainInbox()
			s.pump()
		case <-tick.C():
			s.onTick()
			tick.Reset(time.Second)
		}
	}
	tick.Stop()
	// Stop triggering.
	s.stopped = true
	stopWheels()
	s.normal.Stop()
	s.fine.Stop()
	wwg.Wait()
	s.shutdown()
}

func (s *scheduler) drainInbox() {
	for {
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
	s.log.Debug("scheduler", "ready", s.ready.len(), "mem", s.mem, "in_mem", len(s.inMem), "spilled", s.spilled,
		"busy", s.busy, "running", len(s.running), "jobs", len(s.jobs), "pending", s.pending)
	mono := now.Sub(s.lastTick)
	wall := now.Round(0).Sub(s.lastTick.Round(0))
	s.lastTick = now
	if d := wall - mono; d > s.a.cfg.Clock.JumpThreshold || -d > s.a.cfg.Clock.JumpThreshold {
		s.log.Warn("wall clock jumped; re-planning schedules", "jump", d)
		s.replanAll(true)
	}
}

// schedNow is the wall time schedules are evaluated at: the agent's clock,
// or the controller's when adopting its time.
func (s *scheduler) schedNow() time.Time {
	now := s.a.clk.Now().Round(0)
	if s.adopt {
		now = now.Add(time.Duration(s.a.offset.Load()))
	}
	return now
}

// deadline converts a wall time into a wheel deadline on the monotonic clock.
func (s *scheduler) deadline(at time.Time) time.Time {
	now := s.a.clk.Now()
	return now.Add(at.Sub(s.schedNow()))
}

func (s *scheduler) lane(fine bool) *wheel.Driver[wheelItem] {
	if fine {
		return s.fine
	}
	return s.normal
}

// planNext puts the job's next fire after `after` on its wheel.
func (s *scheduler) planNext(j *jobRef, after time.Time) {
	aj := j.assigned
	aj.planSeq++
	if !j.fireable() {
		return
	}
	next, ok := aj.sched.Next(after)
	if !ok {
		return
	}
	aj.next = next
	s.lane(aj.job.Precision == protocol.PrecisionFine).Add(s.deadline(next),
		wheelItem{job: j, seq: aj.planSeq, at: next, prio: uint8(aj.job.Priority)})
}

// replan runs the misfire policy for a job (start, clock jump, skew or
// lease regained) and plans its next fire.
func (s *scheduler) replan(j *jobRef, misfire bool) {
	aj := j.assigned
	if aj == nil {
		return
	}
	now := s.schedNow()
	from := aj.lastFire
	if from.IsZero() || from.After(now) {
		from = now
	}
	if misfire && j.fireable() && s.canFire(j) {
		plan := schedule.Plan(aj.sched, aj.job.Misfire.Misfire(), from, now)
		if plan.Missed > 0 {
			s.recordMissed(j, plan)
		}
		for _, t := range plan.Run {
			s.fireJob(j, t)
		}
		if len(plan.Run) > 0 {
			from = plan.Run[len(plan.Run)-1]
		} else if plan.Missed > 0 {
			from = plan.LastMissed
		}
	}
	if from.Before(now) && !misfire {
		from = now
	}
	if from.Before(now) {
		from = now
	}
	s.planNext(j, from)
}

func (s *scheduler) replanAll(misfire bool) {
	ids := make([]string, 0, len(s.jobs))
	for id, j := range s.jobs {
		if j.assigned != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.replan(s.jobs[id], misfire)
	}
}

// canFire checks skew and lease.
func (s *scheduler) canFire(j *jobRef) bool {
	if s.skewRefusing {
		return false
	}
	if aj := j.assigned; aj != nil && aj.epoch > 0 {
		return !aj.leaseUntil.IsZero() && s.a.clk.Now().Before(aj.leaseUntil)
	}
	return true
}

// fire handles a wheel item.
func (s *scheduler) fire(w wheelItem) {
	if s.stopped {
		return
	}
	j := w.job
	if w.id != 0 {
		s.pending--
		if s.skewRefusing {
			s.held = append(s.held, w)
			s.log.Warn("clock skew over clock.max_skew: holding run", "exec_row", w.id, "offset", time.Duration(s.a.offset.Load()))
			return
		}
		s.fireRun(w)
		return
	}
	aj := j.assigned
	if aj == nil || w.seq != aj.planSeq {
		return // stale: unassigned or re-planned
	}
	s.planNext(j, w.at)
	if !j.fireable() {
		return
	}
	if s.skewRefusing {
		s.log.Warn("clock skew over clock.max_skew: refusing to fire", "job_id", j.id, "scheduled_at", w.at,
			"offset", time.Duration(s.a.offset.Load()))
		return
	}
	if !s.canFire(j) {
		s.log.Debug("no valid lease: not firing", "job_id", j.id, "epoch", aj.epoch)
		return
	}
	s.fireJob(j, w.at)
}

// fireJob records one periodic fire: TRIGGERED (or SKIPPED by overlap).
func (s *scheduler) fireJob(j *jobRef, at time.Time) {
	aj := j.assigned
	execID := protocol.ExecID(j.id, at)
	if aj.shard != nil {
		execID = protocol.BroadcastExecID(j.id, at, aj.shard.Index)
	}
	aj.lastFire = at
	ref, epoch, shard := aj.ref, aj.epoch, aj.shard
	prio, fine := aj.job.Priority, aj.job.Precision == protocol.PrecisionFine
	si, st := -1, 0
	if shard != nil {
		si, st = shard.Index, shard.Total
	}
	now := s.a.clk.Now()
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit {
		s.a.st.Submit(func(tx *store.Tx) error {
			_, ins, err := tx.InsertExec(store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
				Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
				ShardIndex: si, ShardTotal: st, FinishedAt: now.Round(0), Outcome: "skipped"})
			if err != nil || !ins {
				return err
			}
			if err := tx.SetLastFire(ref, at); err != nil {
				return err
			}
			return s.a.enqueue(tx, protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
				ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "overlap"})
		}, func(err error) {
			if err != nil {
				s.post(func() { s.log.Error("record skipped fire", "exec_id", execID, "err", err) })
				return
			}
			s.a.kickOutbox()
		})
		s.log.Info("fire skipped: previous still active (overlap forbid)", "job_id", j.id, "exec_id", execID, "run_at", at)
		return
	}
	j.active++
	var id int64
	var ins bool
	s.a.st.Submit(func(tx *store.Tx) error {
		var err error
		id, ins, err = tx.InsertExec(store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateTriggered,
			Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
			ShardIndex: si, ShardTotal: st, TriggeredAt: now.Round(0)})
		if err != nil || !ins {
			return err
		}
		if err := tx.SetLastFire(ref, at); err != nil {
			return err
		}
		return s.a.enqueue(tx, protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportTriggered,
			ScheduledAt: at, Epoch: epoch, Shard: shard})
	}, func(err error) {
		if err == nil && ins {
			s.a.kickOutbox()
		}
		s.post(func() { s.triggered(j, id, ins, err, execID, at, prio) })
	})
}

// fireRun triggers a run command's attempt whose run_at has come.
func (s *scheduler) fireRun(w wheelItem) {
	j := w.job
	j.refs--
	j.active++
	now := s.a.clk.Now()
	var ok bool
	var execID string
	s.a.st.Submit(func(tx *store.Tx) error {
		var err error
		if ok, err = tx.MarkTriggered(w.id, now.Round(0)); err != nil || !ok {
			return err
		}
		e, err := tx.ExecRow(w.id)
		if err != nil {
			return err
		}
		execID = e.ExecID
		return s.a.enqueue(tx, rowReport(e, protocol.ReportTriggered))
	}, func(err error) {
		if err == nil && ok {
			s.a.kickOutbox()
		}
		s.post(func() { s.triggered(j, w.id, ok, err, execID, w.at, int(w.prio)) })
	})
}

// rowReport starts a report about an attempt row.
func rowReport(e store.Exec, kind protocol.ReportKind) protocol.Report {
	r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: kind, ScheduledAt: e.ScheduledAt, Epoch: e.Epoch}
	if e.ShardTotal > 0 {
		r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
	}
	return r
}

// triggered runs when a TRIGGERED row is durable.
func (s *scheduler) triggered(j *jobRef, id int64, ok bool, err error, execID string, at time.Time, prio int) {
	if err != nil || !ok {
		j.active--
		if err != nil {
			s.log.Error("record trigger", "job_id", j.id, "exec_id", execID, "err", err)
		}
		s.gc(j)
		return
	}
	s.log.Info("submitted", "job_id", j.id, "exec_id", execID, "exec_row", id, "run_at", at, "priority", prio)
	if !s.accept(&item{id: id, job: j, prio: uint8(prio), runAt: at}) {
		j.active-- // counted again when reloaded
	}
}

// accept puts a durable TRIGGERED item in memory, or leaves it in SQLite
// when the queue is full (it is reloaded when room frees); false then.
func (s *scheduler) accept(it *item) bool {
	if _, dup := s.inMem[it.id]; dup {
		return true
	}
	if s.spilled || s.mem >= s.a.cfg.Queue.Size {
		if !s.spilled {
			s.log.Warn("ready queue full; further executions wait in SQLite", "size", s.a.cfg.Queue.Size)
		}
		s.spilled = true
		return false
	}
	it.enqueued = s.a.clk.Now()
	s.inMem[it.id] = it
	s.mem++
	j := it.job
	if j.running+j.inReady < j.limit {
		j.inReady++
		s.ready.push(it)
	} else {
		j.waiting.push(it)
	}
	return true
}

// pump dispatches ready items to free workers and reloads spilled ones.
func (s *scheduler) pump() {
	if s.stopped {
		return
	}
	limit := s.workers
	if s.slowStart {
		if s.ready.len() == 0 && !s.spilled {
			s.slowStart = false
			s.log.Info("catch-up backlog drained; all workers in use", "workers", s.workers)
		} else {
			limit = max(1, s.workers/DefaultSlowStartFraction)
		}
	}
	now := s.a.clk.Now()
	for s.busy < limit {
		it, ok := s.ready.pop(now)
		if !ok {
			break
		}
		s.mem--
		j := it.job
		j.inReady--
		j.running++
		s.busy++
		lag := now.Round(0).Sub(it.runAt)
		s.lags[s.lagN%len(s.lags)] = lag
		s.lagN++
		ctx, cancel := context.WithCancelCause(context.Background())
		s.running[it.id] = running{it: it, cancel: cancel}
		s.log.Info("dispatched", "job_id", j.id, "exec_row", it.id, "dequeued_at", now.Round(0), "lag", lag,
			"waited", now.Sub(it.enqueued))
		s.work <- workUnit{it: it, ctx: ctx}
	}
	if s.spilled && s.mem < s.a.cfg.Queue.Size/2 {
		s.reload()
	}
}

// reload reads spilled TRIGGERED rows back into memory, oldest first.
func (s *scheduler) reload() {
	room := s.a.cfg.Queue.Size - s.mem
	s.log.Debug("reloading spilled executions", "room", room, "in_memory", len(s.inMem))
	var after int64
	loaded := 0
	for {
		limit := room + len(s.inMem)
		rows, err := s.a.st.LiveExecs(context.Background(), store.StateTriggered, after, limit)
		if err != nil {
			s.log.Error("reload spilled executions", "err", err)
			return
		}
		for _, e := range rows {
			if _, in := s.inMem[e.ID]; in {
				after = e.ID
				continue
			}
			if loaded >= room {
				// Room filled and more are left: stay spilled.
				s.spilled = true
				return
			}
			after = e.ID
			j := s.job(e.JobID)
			if e.Concurrency > 0 && j.assigned == nil {
				j.limit = e.Concurrency
			}
			s.spilled = false // accept must keep it
			j.active++
			s.accept(&item{id: e.ID, job: j, prio: uint8(e.Priority), runAt: e.ScheduledAt})
			loaded++
		}
		if len(rows) < limit {
			// Every TRIGGERED row is in memory now.
			s.spilled = false
			return
		}
	}
}

// done runs when a worker finished an attempt and its final state is durable.
func (s *scheduler) done(it *item) {
	j := it.job
	delete(s.running, it.id)
	delete(s.inMem, it.id)
	j.running--
	j.active--
	for j.waiting.size > 0 && j.running+j.inReady < j.limit {
		w := j.waiting.pop()
		j.inReady++
		s.ready.push(w)
	}
	s.gc(j)
}

// freed runs when a worker slot is free again.
func (s *scheduler) freed() { s.busy-- }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
