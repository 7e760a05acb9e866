package agent

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
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
}

func newScheduler(a *Agent) *scheduler {
	s := &scheduler{a: a, log: a.log, notify: make(chan struct{}, 1), jobs: map[string]*jobRef{}, byRef: map[int64]*jobRef{},
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
	if uint32(aj.planSeq) == 0 {
		aj.planSeq++ // 0 marks a run item on the wheel
	}
	if !j.fireable() {
		return
	}
	next, ok := aj.sched.Next(after)
	if !ok {
		return
	}
	aj.next = next
	s.lane(aj.job.Precision == protocol.PrecisionFine).Add(s.deadline(next),
		wheelItem{id: aj.ref, seq: uint32(aj.planSeq), prio: uint8(aj.job.Priority)})
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
	if !w.periodic() {
		s.pending--
		if s.skewRefusing {
			s.held = append(s.held, w)
			s.log.Warn("clock skew over clock.max_skew: holding run", "exec_row", w.id, "offset", time.Duration(s.a.offset.Load()))
			return
		}
		s.fireRun(w)
		return
	}
	j := s.byRef[w.id]
	if j == nil || j.assigned == nil || w.seq != uint32(j.assigned.planSeq) {
		return // stale: unassigned or re-planned
	}
	aj := j.assigned
	at := aj.next
	s.planNext(j, at)
	if !j.fireable() {
		return
	}
	if s.skewRefusing {
		s.log.Warn("clock skew over clock.max_skew: refusing to fire", "job_id", j.id, "scheduled_at", at,
			"offset", time.Duration(s.a.offset.Load()))
		return
	}
	if !s.canFire(j) {
		s.log.Debug("no valid lease: not firing", "job_id", j.id, "epoch", aj.epoch)
		return
	}
	s.fireJob(j, at)
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
	now := s.a.clk.Now().Round(0)
	if aj.job.Overlap == protocol.OverlapForbid && j.active >= j.limit {
		rep, err := s.a.encodeReport(protocol.Report{JobID: j.id, ExecID: execID, Attempt: 1, Kind: protocol.ReportSkipped,
			ScheduledAt: at, Epoch: epoch, Shard: shard, Reason: "overlap"})
		if err != nil {
			s.log.Error("record skipped fire", "exec_id", execID, "err", err)
			return
		}
		s.a.st.Submit(func(tx *store.Tx) error {
			_, ins, err := tx.InsertExec(store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateSkipped,
				Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
				ShardIndex: si, ShardTotal: st, FinishedAt: now, Outcome: "skipped"})
			if err != nil || !ins {
				return err
			}
			if err := tx.SetLastFire(ref, at); err != nil {
				return err
			}
			return rep.enqueue(tx)
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
	row := &store.Exec{ExecID: execID, Attempt: 1, JobID: j.id, State: store.StateTriggered,
		Priority: prio, Fine: b2i(fine), Concurrency: j.limit, ScheduledAt: at, RunAt: at, Epoch: epoch,
		ShardIndex: si, ShardTotal: st, TriggeredAt: now}
	rep, err := s.a.encodeReport(rowReport(*row, protocol.ReportTriggered))
	if err != nil {
		s.log.Error("record trigger", "job_id", j.id, "exec_id", execID, "err", err)
		return
	}
	j.active++
	var ins bool
	s.a.st.Submit(func(tx *store.Tx) error {
		var err error
		row.ID, ins, err = tx.InsertExec(*row)
		if err != nil || !ins {
			return err
		}
		if err := tx.SetLastFire(ref, at); err != nil {
			return err
		}
		if row.Spec, err = tx.JobSpec(ref); err != nil {
			return err
		}
		return rep.enqueue(tx)
	}, func(err error) {
		if err == nil && ins {
			s.a.kickOutbox()
		}
		s.post(func() { s.triggered(j, row, ins, err) })
	})
}

// fireRun triggers a run command's attempt whose run_at has come.
func (s *scheduler) fireRun(w wheelItem) {
	now := s.a.clk.Now().Round(0)
	var row store.Exec
	var ok bool
	s.a.st.Submit(func(tx *store.Tx) error {
		var err error
		if row, ok, err = tx.Trigger(w.id, now); err != nil || !ok {
			return err
		}
		rep, err := s.a.encodeReport(rowReport(row, protocol.ReportTriggered))
		if err != nil {
			return err
		}
		return rep.enqueue(tx)
	}, func(err error) {
		if err == nil && ok {
			s.a.kickOutbox()
		}
		s.post(func() {
			if err != nil || !ok {
				if err != nil {
					s.log.Error("record trigger", "exec_row", w.id, "err", err)
				}
				return
			}
			j := s.job(row.JobID)
			if j.assigned == nil && row.Concurrency > 0 {
				j.limit = row.Concurrency
			}
			j.active++
			s.triggered(j, &row, true, nil)
		})
	})
}

// rowReport starts a report about an attempt row. Reports after the
// triggered one carry the times of the steps before them (TriggeredAt,
// StartedAt), so that the flusher may send only the latest of an attempt's
// reports still in the outbox.
func rowReport(e store.Exec, kind protocol.ReportKind) protocol.Report {
	r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: kind, ScheduledAt: e.ScheduledAt, Epoch: e.Epoch}
	if kind != protocol.ReportTriggered && kind != protocol.ReportSkipped {
		r.TriggeredAt = e.TriggeredAt
		if kind != protocol.ReportRunning {
			r.StartedAt = e.StartedAt
		}
	}
	if e.ShardTotal > 0 {
		r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
	}
	return r
}

// triggered runs when a TRIGGERED row is durable (j.active counts it).
func (s *scheduler) triggered(j *jobRef, row *store.Exec, ok bool, err error) {
	if err != nil || !ok {
		j.active--
		if err != nil {
			s.log.Error("record trigger", "job_id", j.id, "exec_id", row.ExecID, "err", err)
		}
		s.gc(j)
		return
	}
	s.log.Info("submitted", "job_id", j.id, "exec_id", row.ExecID, "exec_row", row.ID, "run_at", row.RunAt, "priority", row.Priority)
	if !s.accept(&item{id: row.ID, job: j, prio: uint8(row.Priority), runAt: row.ScheduledAt, row: row}) {
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

// pump reloads spilled items when there is room and dispatches ready
// items to free workers.
// The items dispatched together are marked RUNNING in one write; each
// goes to a worker once that write is durable.
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
	if s.spilled && s.mem < s.a.cfg.Queue.Size/2 {
		s.reload()
	}
	now := s.a.clk.Now()
	var batch []*item
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
		s.running[it.id] = running{it: it, cancel: cancel, ctx: ctx}
		s.log.Info("dispatched", "job_id", j.id, "exec_row", it.id, "dequeued_at", now.Round(0), "lag", lag,
			"waited", now.Sub(it.enqueued))
		it.started = now
		batch = append(batch, it)
	}
	if len(batch) > 0 {
		s.start(batch)
	}
}

// start marks a batch of dispatched items RUNNING (with their running
// reports) in one write and hands each to a worker once it is durable.
func (s *scheduler) start(batch []*item) {
	a := s.a
	reps := make([]encodedReport, len(batch))
	for i, it := range batch {
		if it.row == nil {
			continue // reloaded: the write function reads it
		}
		it.row.StartedAt = it.started.Round(0)
		r := rowReport(*it.row, protocol.ReportRunning)
		r.At = a.reportTimeAt(it.started)
		r.Lag = protocol.Duration(max(it.started.Round(0).Sub(it.row.ScheduledAt), 0))
		var err error
		if reps[i], err = a.encodeReport(r); err != nil {
			s.log.Error("encode running report", "exec_id", it.row.ExecID, "err", err)
		}
	}
	ok := make([]bool, len(batch))
	s.starting++
	a.st.Submit(func(tx *store.Tx) error {
		for i, it := range batch {
			ok[i] = false
			started, err := tx.MarkRunning(it.id, it.started.Round(0))
			if err != nil {
				return err
			}
			if !started {
				continue // cancelled meanwhile
			}
			if it.row == nil || it.row.Spec == nil {
				if err := s.loadRow(tx, it); err != nil {
					return err
				}
				if reps[i].data == nil {
					r := rowReport(*it.row, protocol.ReportRunning)
					r.At = a.reportTimeAt(it.started)
					r.Lag = protocol.Duration(max(it.started.Round(0).Sub(it.row.ScheduledAt), 0))
					if reps[i], err = a.encodeReport(r); err != nil {
						return err
					}
				}
			}
			if err := reps[i].enqueue(tx); err != nil {
				return err
			}
			ok[i] = true
		}
		return nil
	}, func(err error) {
		if err == nil {
			a.kickOutbox()
		}
		s.post(func() {
			s.starting--
			if err != nil {
				s.log.Error("record running", "attempts", len(batch), "err", err)
			}
			for i, it := range batch {
				if err != nil || !ok[i] {
					s.freed()
					s.done(it)
					continue
				}
				// Never blocks: units in flight ≤ busy ≤ workers = capacity.
				s.work <- workUnit{it: it, ctx: s.running[it.id].ctx}
			}
		})
	})
}

// loadRow reads what running an item needs (reloaded items, or a spec
// that was not carried).
func (s *scheduler) loadRow(tx *store.Tx, it *item) error {
	if it.row == nil {
		e, err := tx.ExecRow(it.id)
		if err != nil {
			return err
		}
		it.row = &e
	}
	it.row.StartedAt = it.started.Round(0)
	spec, err := tx.ExecSpec(it.id)
	if err != nil {
		return err
	}
	it.row.Spec = spec
	return nil
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
			s.accept(&item{id: e.ID, job: j, prio: uint8(e.Priority), runAt: e.ScheduledAt, row: &e})
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
