package scheduler

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// accept puts a durable TRIGGERED item in memory, or leaves it in SQLite
// (false then): when the queue is full (it is reloaded when room frees),
// or when its job already has as many attempts waiting for its concurrency
// as it may run at once (parked: more would only hold queue room that
// other jobs' attempts can use; they come in when the job has room again).
func (r *runQueue) accept(it *item) bool {
	if _, dup := r.inMem[it.id]; dup {
		return true
	}
	j := it.job
	if j.running+j.inReady >= j.limit && j.waiting.size >= j.limit {
		if !j.parked || it.id-1 < j.parkedFrom {
			j.parkedFrom = it.id - 1
		}
		j.parked = true
		r.reloadFrom = min(r.reloadFrom, it.id-1)
		return false
	}
	if r.spilled || r.mem >= r.env.cfg.QueueSize {
		if !r.spilled {
			r.env.cfg.Log.Warn("ready queue full; further executions wait in SQLite", "size", r.env.cfg.QueueSize)
		}
		r.spilled = true
		r.reloadFrom = min(r.reloadFrom, it.id-1)
		return false
	}
	it.enqueued = r.env.now()
	r.inMem[it.id] = it
	r.mem++
	if j.running+j.inReady < j.limit {
		j.inReady++
		r.ready.push(it)
	} else {
		j.waiting.push(it)
	}
	return true
}

// pump reloads spilled items when there is room and dispatches ready
// items to free workers.
// The items dispatched together are marked RUNNING in one write; each
// goes to a worker once that write is durable.
func (r *runQueue) pump() {
	r.reclaimSlots()
	if r.stopped {
		return
	}
	limit := r.workers
	if r.slowStart {
		if r.ready.len() == 0 && !r.spilled {
			r.slowStart = false
			r.env.cfg.Log.Info("catch-up backlog drained; all workers in use", "workers", r.workers)
		} else {
			limit = max(1, r.workers/r.env.cfg.SlowStartFraction)
		}
	}
	if r.spilled && r.mem < r.env.cfg.QueueSize/2 {
		r.reload()
	}
	limit += r.prefetch()
	now := r.env.now()
	var batch []*item
	for r.busy+r.claimsOut < limit { // the slots commands took are theirs (directstart.go)
		it, ok := r.ready.pop(now)
		if !ok {
			break
		}
		r.mem--
		j := it.job
		j.inReady--
		j.running++
		if r.leaseMovedOn(it) {
			continue
		}
		r.busy++
		lag := now.Round(0).Sub(it.runAt)
		r.track(it, lag)
		if r.env.cfg.Log.Enabled(context.Background(), slog.LevelDebug) {
			r.env.cfg.Log.Debug("dispatched", "job_id", j.id, "exec_row", it.id, "dequeued_at", now.Round(0), "lag", lag,
				"waited", now.Sub(it.enqueued))
		}
		it.started = now
		batch = append(batch, it)
	}
	if len(batch) > 0 {
		r.start(batch)
	}
	r.offerSlots(limit)
}

// track counts a dispatched attempt's start lag and registers it running,
// with the context a cancel or a stop cancels; it returns that context.
func (r *runQueue) track(it *item, lag time.Duration) context.Context {
	r.lags[r.lagN%len(r.lags)] = lag
	r.lagN++
	ctx, cancel := context.WithCancelCause(context.Background())
	r.running[it.id] = running{it: it, cancel: cancel, ctx: ctx}
	return ctx
}

// start marks a batch of dispatched items RUNNING (with their running
// reports) in one write and hands each to a worker once it is durable
// (batchStarted).
func (r *runQueue) start(batch []*item) {
	env := r.env
	reps := make([]Report, len(batch))
	for i, it := range batch {
		if it.row == nil {
			continue // no row carried: the write function reads it
		}
		it.row.StartedAt = it.started.Round(0)
		var err error
		if reps[i], err = env.host.EncodeReport(env.runningReport(it)); err != nil {
			env.cfg.Log.Error("encode running report", "exec_id", it.row.ExecID, "err", err)
		}
	}
	ok := make([]bool, len(batch))
	r.starting++
	ids := make([]int64, len(batch))
	for i, it := range batch {
		ids[i] = it.id
	}
	at := batch[0].started.Round(0) // pump starts a batch at one time
	env.cfg.Store.Submit(func(tx *store.Tx) error {
		moved, err := tx.MarkRunningAll(ids, at)
		if err != nil {
			return err
		}
		for i, it := range batch {
			ok[i] = false
			if !moved[it.id] {
				continue // cancelled meanwhile
			}
			if it.row == nil || it.row.Spec == nil {
				if err := loadRow(tx, it); err != nil {
					return err
				}
				if reps[i].Data == nil {
					var err error
					if reps[i], err = env.host.EncodeReport(env.runningReport(it)); err != nil {
						return err
					}
				}
			}
			// A run under a group lease reports at once.
			reps[i].Hold = it.row.Epoch == 0
			if err := reps[i].Enqueue(tx); err != nil {
				return err
			}
			ok[i] = true
		}
		return nil
	}, func(err error) {
		if err == nil {
			env.host.KickOutbox()
		}
		env.mail.post(batchStarted{batch: batch, ok: ok, err: err})
	})
}

// runningReport is the running report of a dispatched item.
func (e *env) runningReport(it *item) protocol.Report {
	r := rowReport(*it.row, protocol.ReportRunning)
	r.At = e.reportTime(it.started)
	r.Lag = protocol.Duration(startLag(it.started, it.row.ScheduledAt))
	return r
}

// started hands the items of a batch now RUNNING to workers.
func (r *runQueue) started(m batchStarted) {
	r.starting--
	if len(m.batch) > 0 && m.err == nil {
		r.noteStartWrite(r.env.now().Sub(m.batch[0].started))
	}
	if m.err != nil {
		r.env.cfg.Log.Error("record running", "attempts", len(m.batch), "err", m.err)
	}
	for i, it := range m.batch {
		if m.err != nil || !m.ok[i] {
			r.busy--
			r.done(it)
			continue
		}
		if r.movedOn(it) {
			// Reloaded from SQLite, so checked only now that its row
			// is read: the job moved to a newer epoch meanwhile.
			r.busy--
			r.finishLeaseLost(it)
			continue
		}
		// Never blocks: units in flight ≤ busy ≤ (1 + maxPrefetchFactor)
		// × workers = capacity (workers, and the prefetched: prefetch.go).
		r.work <- workUnit{it: it, ctx: r.running[it.id].ctx}
	}
}

// loadRow reads what running an item needs when it was not carried (a
// row without its spec: its job was unassigned without a snapshot).
func loadRow(tx *store.Tx, it *item) error {
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

// reloadPage bounds the rows one reload query reads: a reload stops as
// soon as the room is filled, so a larger page mostly reads rows that stay.
const reloadPage = 256

// reload reads spilled TRIGGERED rows back into memory with their specs
// (so the write that starts them reads nothing), oldest first;
// rows of parked jobs stay (and take no room): the query leaves them out,
// so a reload reads about the rows it loads, not every spilled row.
func (r *runQueue) reload() {
	room := r.env.cfg.QueueSize - r.mem
	r.env.cfg.Log.Debug("reloading spilled executions", "room", room, "in_memory", len(r.inMem))
	// Rows up to reloadFrom are in memory: scanning from there (not from
	// the first row) keeps a reload's cost to the rows it loads.
	after := r.reloadFrom
	r.reloadFrom = math.MaxInt64 // lowered by accept's refusals and an early stop
	var parked []string
	for id, j := range r.jobs.byID {
		if j.parked {
			parked = append(parked, id)
			r.reloadFrom = min(r.reloadFrom, j.parkedFrom) // not read below, still spilled
		}
	}
	loaded := 0
	for {
		limit := min(room+len(r.inMem), reloadPage)
		rows, err := r.env.cfg.Store.LiveExecsExcept(context.Background(), store.StateTriggered, after, limit, parked)
		if err != nil {
			r.reloadFrom = min(r.reloadFrom, after)
			r.env.cfg.Log.Error("reload spilled executions", "err", err)
			return
		}
		for _, e := range rows {
			if _, in := r.inMem[e.ID]; in {
				after = e.ID
				continue
			}
			if loaded >= room {
				// Room filled and more are left: stay spilled.
				r.spilled = true
				r.reloadFrom = min(r.reloadFrom, after)
				return
			}
			after = e.ID
			j := r.jobs.job(e.JobID)
			if e.Concurrency > 0 && j.assigned == nil {
				j.limit = e.Concurrency
			}
			r.spilled = false // accept must keep it
			// j.active counts it already (since it was triggered).
			wasParked := j.parked
			if r.accept(&item{id: e.ID, job: j, prio: uint8(e.Priority), runAt: e.ScheduledAt, row: &e}) {
				loaded++
			} else if j.parked && !wasParked {
				parked = append(parked, j.id) // the next pages leave its rows out
			}
		}
		if len(rows) < limit {
			// Every TRIGGERED row is in memory now.
			r.spilled = false
			return
		}
	}
}

// cancelledSpilled counts out an attempt cancelled while it was not in
// memory: a PENDING run (never counted) or a TRIGGERED attempt left in
// SQLite by a full ready queue, which j.active still counts. The cancel's
// write has finished the row already; its triggered_at tells the two apart.
func (r *runQueue) cancelledSpilled(rowID int64) {
	e, err := r.env.cfg.Store.Exec(context.Background(), rowID)
	if err != nil {
		r.env.cfg.Log.Error("read cancelled attempt", "exec_row", rowID, "err", err)
		return
	}
	if e.TriggeredAt.IsZero() {
		return
	}
	j := r.jobs.byID[e.JobID]
	if j == nil || j.active == 0 {
		return
	}
	j.active--
	r.jobs.gc(j)
}

// done runs when a worker finished an attempt and its final state is durable.
func (r *runQueue) done(it *item) {
	j := it.job
	delete(r.running, it.id)
	delete(r.inMem, it.id)
	j.running--
	j.active--
	for j.waiting.size > 0 && j.running+j.inReady < j.limit {
		w := j.waiting.pop()
		j.inReady++
		r.ready.push(w)
	}
	// Hysteresis: a parked job comes back when half its waiting room is
	// free, so that each reload brings in many of its attempts (unparking
	// at every finish made a reload, a scan of the spilled rows, per
	// finished attempt).
	if j.parked && j.waiting.size <= j.limit/2 {
		// reloadFrom ≤ j.parkedFrom already (accept and reload keep it so).
		j.parked = false
		r.spilled = true // its attempts left in SQLite may come in now
	}
	r.jobs.gc(j)
}

// leaseMovedOn drops, without running it, an attempt fired under a group
// lease when the job has moved on since (see movedOn). Attempts reloaded
// from SQLite carry no row yet: start checks them once the row is read.
func (r *runQueue) leaseMovedOn(it *item) bool {
	if !r.movedOn(it) {
		return false
	}
	r.running[it.id] = running{it: it, cancel: func(error) {}} // a cancel meanwhile has nothing to stop
	r.finishLeaseLost(it)
	return true
}

// movedOn reports whether it was fired under a group lease of an epoch its
// job has moved past (unassigned here, or a newer epoch): the controller
// has taken that attempt to the new holder (agent_lost), so running it
// here too would run it twice.
func (r *runQueue) movedOn(it *item) bool {
	j := it.job
	return it.row != nil && it.row.Epoch > 0 && (j.assigned == nil || j.assigned.epoch > it.row.Epoch)
}

// fenceMovedOn marks the dispatched attempts of j whose group lease j has
// moved on from (movedOn) since they were dispatched: a worker that takes
// one of them afterwards does not run it (worker.runOne), as pump and
// started would not have handed it over. One whose handler already
// started runs on. Called where j's assignment or epoch changes.
func (r *runQueue) fenceMovedOn(j *jobRef) {
	for _, run := range r.running {
		if run.it.job == j && r.movedOn(run.it) {
			run.it.fenced.Store(true)
		}
	}
}

// finishLeaseLost finishes the attempt's row as lease_lost without running
// it and reports it fenced (dropFenced).
func (r *runQueue) finishLeaseLost(it *item) {
	r.dropFenced(it.id, fencedWhy(it.job), it)
}
