package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// env is what every part of the scheduler reads: set by New, not changed
// after.
type env struct {
	cfg  Config
	host Host
	mail *mailbox
	// slots is the room (free workers, and the prefetch's while handlers
	// are short) the scheduler offers to due runs, which the applier
	// stores RUNNING at once (directstart.go).
	slots slotOffer
}

// now reads the agent's clock.
func (e *env) now() time.Time { return e.cfg.Clock.Now() }

// reportTime corrects an agent clock reading by the controller offset.
func (e *env) reportTime(t time.Time) time.Time {
	return t.Round(0).Add(e.host.ClockOffset()).UTC()
}

// Scheduler is the agent's scheduler: New builds it, Recover loads the
// store's state, Run runs it. Apply, CheckSkew and HeartbeatReply may be
// called from any goroutine; View and Backlog too.
type Scheduler struct {
	env  *env
	jobs *jobSet
	runs *runQueue
	trig *trigger
	cmds *applier

	// view is what heartbeats and registrations read (view.go).
	view      atomic.Pointer[View]
	workers   sync.WaitGroup
	lastTick  time.Time
	lastPrune time.Time
}

// New builds a scheduler; it starts nothing.
func New(cfg Config, host Host) (*Scheduler, error) {
	e := &env{cfg: cfg, host: host, mail: newMailbox()}
	jobs := &jobSet{byID: map[string]*jobRef{}, byRef: map[int64]*jobRef{}}
	runs := newRunQueue(e, jobs)
	trig, err := newTrigger(e, jobs, runs)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{env: e, jobs: jobs, runs: runs, trig: trig, cmds: &applier{env: e, refusing: &trig.refusing}}
	s.view.Store(&View{})
	return s, nil
}

// Apply applies command seq of AX_CMD idempotently: the command's effect
// and the cursor are written in one transaction, and the scheduler learns
// of it once that is durable. A malformed command (or one for another
// agent) is logged with its reason and skipped: the cursor advances. done,
// if set, is called when the write is durable (or failed). Apply runs on
// the caller's goroutine and never waits for the scheduler's.
func (s *Scheduler) Apply(seq uint64, data []byte, done func(error)) { s.cmds.apply(seq, data, done) }

// CheckSkew applies clock.max_skew to the current clock offset (after a
// registration measured it). With on_skew refuse, a command applied after
// CheckSkew returns already sees whether the agent refuses to fire (Apply
// runs on the caller's goroutine, not the scheduler's); the scheduler
// goroutine does the rest (logs, fires held back, plans redone).
func (s *Scheduler) CheckSkew() {
	if !s.env.cfg.AdoptSkew {
		s.trig.refusing.Store(s.trig.overMaxSkew(s.env.host.ClockOffset()))
	}
	s.env.mail.post(skewCheck{})
}

// HeartbeatReply hands the scheduler the leases a heartbeat reply renewed
// (valid from t0, when the heartbeat was sent) and those it lost; they are
// applied before any other waiting message, then the clock skew is
// checked again.
func (s *Scheduler) HeartbeatReply(t0 time.Time, renewed []protocol.Lease, lost []protocol.HeldLease) {
	s.env.mail.postUrgent(heartbeatReplied{t0: t0, renewed: renewed, lost: lost})
}

// MaxQueuedFires bounds the wheel fires waiting for the scheduler
// goroutine. Beyond it the wheels wait (backpressure): due items stay on
// them and fire late, none is dropped (a periodic job has one item on a
// wheel at a time, and each fire plans the next from its scheduled time,
// so every fire time is still recorded, late).
const MaxQueuedFires = 1024

// Backlog is what waits for the scheduler goroutine.
type Backlog struct {
	// Messages is the messages queued (wheel fires, durable writes,
	// commands, heartbeat replies).
	Messages int
	// WheelFires is the wheel fires among them (at most MaxQueuedFires).
	WheelFires int
	// OnWheels is the items on the wheels (periodic fires and runs).
	OnWheels int
}

// Backlog says what waits for the scheduler goroutine (safe from any
// goroutine).
func (s *Scheduler) Backlog() Backlog {
	return Backlog{Messages: s.env.mail.len(), WheelFires: len(s.trig.fireSlots),
		OnWheels: s.trig.normal.Len() + s.trig.fine.Len()}
}

// Run is the scheduler goroutine: it runs the wheels and the workers and
// handles messages until ctx is done, then stops triggering, writes what
// it counted, and gives running handlers Config.Grace before cancelling
// them. Call Recover first.
func (s *Scheduler) Run(ctx context.Context) {
	cfg := s.env.cfg
	stopWheels := s.trig.start()
	for range cfg.Workers {
		w := &worker{env: s.env}
		s.workers.Add(1)
		go func() { defer s.workers.Done(); w.loop(s.runs.work) }()
	}
	tick := cfg.Clock.NewTimer(time.Second)
	s.lastTick = s.env.now()
	s.publishView()
	s.runs.pump()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-s.env.mail.notify:
			s.drainBatch(ctx)
			s.runs.pump()
		case <-tick.C():
			s.onTick()
			tick.Reset(time.Second)
		}
	}
	tick.Stop()
	// Stop triggering; the skipped runs and fires counted so far are
	// written.
	s.trig.flushSkips(s.env.now(), 0)
	s.trig.flushFires()
	s.trig.stopped, s.runs.stopped = true, true
	s.runs.reclaimSlots() // no command takes a worker from here on
	stopWheels()
	s.shutdown()
}

// handle handles one message on the scheduler goroutine.
func (s *Scheduler) handle(m message) {
	switch m := m.(type) {
	case wheelFired:
		<-s.trig.fireSlots
		s.trig.fire(m.w)
	case flushFires:
		s.trig.flushFires()
	case firesWritten:
		s.trig.firesWritten(m)
	case runTriggered:
		s.trig.runTriggered(m)
	case batchStarted:
		s.runs.started(m)
	case slotFreed:
		s.runs.busy--
		s.runs.noteHandler(m.dur)
	case attemptDone:
		s.runs.done(m.it)
	case attemptFenced:
		s.runs.busy--
		s.runs.finishLeaseLost(m.it)
	case fenceDropped:
		s.runs.fenceDropped(m)
	case jobAssigned:
		s.assigned(m.row)
	case jobUnassigned:
		s.unassigned(m.id)
	case runStored:
		if m.started {
			s.runs.runStarted(m.e, m.spec)
		} else {
			s.runs.stored(m.e, m.due, m.spec, s.trig)
		}
	case slotBack:
		s.runs.slotReturned()
	case attemptCancelled:
		s.runs.cancelled(m.rowID)
	case leaseEpochSet:
		s.leaseEpoch(m.jobID, m.epoch)
	case leaseLost:
		s.leaseRevoked(m.jobID, m.epoch)
	case heartbeatReplied:
		s.heartbeatReplied(m)
	case skewCheck:
		s.trig.checkSkew()
	}
}

// handleUrgent handles the urgent messages queued so far and publishes the
// heartbeat view they may have changed.
func (s *Scheduler) handleUrgent() {
	u := s.env.mail.takeUrgent()
	if len(u) == 0 {
		return
	}
	for _, m := range u {
		s.handle(m)
	}
	s.publishView()
}

// drainBatch handles the messages queued so far, not those they or others
// queue meanwhile (notify is set again for them), and stops early when ctx
// is done, leaving the rest queued. When fires come faster than the store
// takes their writes, the mailbox never empties: the loop must still see
// a stop, and its timer.
func (s *Scheduler) drainBatch(ctx context.Context) {
	mail := s.env.mail
	s.handleUrgent()
	batch := mail.take()
	for i, m := range batch {
		if mail.hasUrgent() {
			s.handleUrgent()
		}
		if ctx.Err() != nil {
			mail.putBack(batch[i:])
			mail.pending() // notify again: this batch's token is spent
			return
		}
		s.handle(m)
	}
	mail.pending()
}

// drainAll handles messages until none is queued.
func (s *Scheduler) drainAll() {
	for {
		s.handleUrgent()
		batch := s.env.mail.take()
		if len(batch) == 0 {
			return
		}
		for _, m := range batch {
			s.handle(m)
		}
	}
}

// shutdown gives running handlers the grace period, then cancels them.
func (s *Scheduler) shutdown() {
	mail := s.env.mail
	// Batches being marked RUNNING, and runs stored RUNNING on a slot
	// taken before the stop (directstart.go), still hand their items to
	// workers. What is queued now is handled first: its notify token may
	// be spent.
	for s.drainAll(); s.runs.starting > 0 || s.runs.claimsOut > 0; s.drainAll() {
		<-mail.notify
	}
	close(s.runs.work)
	grace := s.env.cfg.Clock.NewTimer(s.env.cfg.Grace)
	done := make(chan struct{})
	go func() { s.workers.Wait(); close(done) }()
	for {
		select {
		case <-done:
			grace.Stop()
			// Let the last finishes' callbacks land (they only post).
			s.drainAll()
			return
		case <-mail.notify:
			s.drainAll()
		case <-grace.C():
			s.env.cfg.Log.Warn("shutdown grace over; cancelling running handlers", "running", len(s.runs.running))
			s.runs.cancelAll(errShutdown)
		}
	}
}

// onTick publishes the view, writes skipped runs, prunes every
// store.prune_interval and detects wall-clock jumps: the wall clock and
// the monotonic clock diverging by more than clock.jump_threshold
// re-plans every schedule.
func (s *Scheduler) onTick() {
	cfg := s.env.cfg
	now := s.env.now()
	s.publishView()
	s.trig.flushSkips(now, cfg.SkippedWindow)
	r := s.runs
	cfg.Log.Debug("scheduler", "ready", r.ready.len(), "mem", r.mem, "in_mem", len(r.inMem), "spilled", r.spilled,
		"busy", r.busy, "running", len(r.running), "jobs", len(s.jobs.byID), "pending", s.trig.pending)
	if s.lastPrune.IsZero() || now.Sub(s.lastPrune) >= cfg.PruneInterval {
		s.lastPrune = now
		s.prune(now)
	}
	mono := now.Sub(s.lastTick)
	wall := now.Round(0).Sub(s.lastTick.Round(0))
	s.lastTick = now
	if d := wall - mono; d > cfg.JumpThreshold || -d > cfg.JumpThreshold {
		cfg.Log.Warn("wall clock jumped; re-planning schedules", "jump", d)
		s.trig.replanAll(true)
	}
}

// prune deletes final executions older than store.retention (in the
// background).
func (s *Scheduler) prune(now time.Time) {
	cfg := s.env.cfg
	before := now.Round(0).Add(-cfg.Retention)
	var n int64
	cfg.Store.Submit(func(tx *store.Tx) error {
		var err error
		n, err = tx.Prune(before)
		return err
	}, func(err error) {
		switch {
		case err != nil:
			cfg.Log.Error("prune finished executions", "err", err)
		case n > 0:
			cfg.Log.Info("pruned finished executions", "rows", n, "finished_before", before)
		}
	})
}
