package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// Cancel causes of a running attempt.
var (
	errCancelled = errors.New("cancelled by command")
	errShutdown  = errors.New("agent shutting down")
)

// runQueue owns the attempts between TRIGGERED and final: the ready queue
// and the jobs' waiting lines in memory (bounded by queue.size; the rest
// stay in SQLite, spilled), the worker slots, the running attempts and
// the runs fenced by a group lease (scheduler goroutine only).
type runQueue struct {
	env  *env
	jobs *jobSet

	ready   readyQueue
	inMem   map[int64]*item
	mem     int // items in ready + waiting
	spilled bool
	running map[int64]running
	// fenced are the PENDING runs fired under a group lease (epoch > 0):
	// they run only while this agent holds the job's lease at that epoch.
	fenced map[int64]runFence

	work     chan workUnit
	starting int // dispatched batches whose RUNNING write is not durable yet
	// offered is the worker slots offered to due runs at the last pump
	// (not in busy: pump takes back those not taken before it reads busy);
	// claimsOut those taken whose runs have not come in or back yet
	// (directstart.go).
	offered, claimsOut int
	workers            int
	busy               int // dispatched attempts whose handler has not returned
	// handlerAvg is a moving average of the handlers' run times
	// (noteHandler), writeAvg one of the RUNNING writes' round trips
	// (noteStartWrite); they decide the prefetch (prefetch.go).
	handlerAvg time.Duration
	writeAvg   time.Duration
	slowStart  bool
	stopped    bool

	lags [1024]time.Duration
	lagN int

	// reloadFrom: every TRIGGERED row with a lower or equal id is in
	// memory, so reload scans after it (0 at start: recovery spills
	// without ids; math.MaxInt64: nothing left in SQLite since).
	reloadFrom int64
}

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

func newRunQueue(e *env, jobs *jobSet) *runQueue {
	r := &runQueue{env: e, jobs: jobs, inMem: map[int64]*item{}, running: map[int64]running{},
		fenced: map[int64]runFence{}, workers: e.cfg.Workers, work: make(chan workUnit, (1+maxPrefetchFactor)*e.cfg.Workers)}
	r.ready.agingStep = e.cfg.AgingStep
	return r
}

// dropFenced finishes attempt row rowID as lease_lost without running it
// — its group job's lease moved on from the attempt's epoch — and, in the
// same transaction, puts a fenced report in the outbox: the controller
// counts the attempt as lost and sends the next one to the job's current
// holder, instead of waiting for a run that never comes. it, if set, is
// the queued attempt it was: done once the write finished (fenceDropped).
func (r *runQueue) dropFenced(rowID int64, why string, it *item) {
	env := r.env
	now := env.now().Round(0)
	var e store.Exec
	reported := false
	env.cfg.Store.Submit(func(tx *store.Tx) error {
		reported = false
		var err error
		if e, err = tx.ExecRow(rowID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}
		ok, err := tx.Finish(rowID, store.StateFinished, now, "lease_lost", nil)
		if err != nil || !ok || e.Epoch == 0 {
			return err
		}
		r := protocol.Report{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, Kind: protocol.ReportFenced,
			ScheduledAt: e.ScheduledAt, Epoch: e.Epoch, Reason: why}
		if e.ShardTotal > 0 {
			r.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
		}
		reported = true
		return env.enqueue(tx, r)
	}, func(err error) {
		if err == nil && reported {
			env.host.KickOutbox()
		}
		env.mail.post(fenceDropped{rowID: rowID, e: e, why: why, reported: reported, err: err, it: it})
	})
}

// fenceDropped runs when dropFenced's write finished.
func (r *runQueue) fenceDropped(m fenceDropped) {
	log := r.env.cfg.Log
	if m.err != nil {
		log.Error("drop attempt of a lost lease", "exec_row", m.rowID, "err", m.err)
	} else if m.reported {
		log.Warn("attempt dropped unrun and reported fenced: its group lease moved on", "job_id", m.e.JobID,
			"exec_id", m.e.ExecID, "attempt", m.e.Attempt, "epoch", m.e.Epoch, "why", m.why)
	}
	if m.it != nil {
		r.done(m.it)
	}
}

// stored runs after a run command is durable: a due run (stored
// TRIGGERED) enters the queue, a later one goes on its wheel.
func (r *runQueue) stored(e store.Exec, due bool, spec *runSpec, t *trigger) {
	if !due {
		e.Spec = nil
		t.planRun(e)
		return
	}
	j := r.jobs.job(e.JobID)
	if j.assigned == nil && e.Concurrency > 0 {
		j.limit = e.Concurrency
	}
	j.active++
	r.triggered(j, &e, spec, true, nil)
}

// cancelled runs after a cancel command is durable: a running attempt's
// context is cancelled; a queued one leaves the queue (its row was already
// finished as cancelled in the command's transaction).
func (r *runQueue) cancelled(rowID int64) {
	if run, ok := r.running[rowID]; ok {
		run.cancel(errCancelled)
		r.env.cfg.Log.Info("cancelling running attempt", "exec_row", rowID)
		return
	}
	delete(r.fenced, rowID)
	it, ok := r.inMem[rowID]
	if !ok {
		r.cancelledSpilled(rowID)
		return
	}
	j := it.job
	if _, ok := r.ready.remove(rowID); ok {
		j.inReady--
	} else if !removeFIFO(&j.waiting, rowID) {
		return
	}
	delete(r.inMem, rowID)
	r.mem--
	j.active--
	r.jobs.gc(j)
}

// cancelAll cancels every running attempt with cause.
func (r *runQueue) cancelAll(cause error) {
	for _, run := range r.running {
		run.cancel(cause)
	}
}

func removeFIFO(f *fifo, id int64) bool {
	var r readyQueue
	r.q[0] = *f
	r.n = f.size
	_, ok := r.remove(id)
	*f = r.q[0]
	return ok
}

// triggered runs when a TRIGGERED row is durable (j.active counts it).
func (r *runQueue) triggered(j *jobRef, row *store.Exec, spec *runSpec, ok bool, err error) {
	log := r.env.cfg.Log
	if err != nil || !ok {
		j.active--
		if err != nil {
			log.Error("record trigger", "job_id", j.id, "exec_id", row.ExecID, "err", err)
		}
		r.jobs.gc(j)
		return
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug("submitted", "job_id", j.id, "exec_id", row.ExecID, "exec_row", row.ID, "run_at", row.RunAt, "priority", row.Priority)
	}
	// Spilled (left in SQLite) or not, it stays counted in j.active.
	r.accept(&item{id: row.ID, job: j, prio: uint8(row.Priority), runAt: row.ScheduledAt, row: row, spec: spec})
}
