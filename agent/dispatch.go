package agent

import (
	"context"
	"log/slog"
	"math"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// accept puts a durable TRIGGERED item in memory, or leaves it in SQLite
// (false then): when the queue is full (it is reloaded when room frees),
// or when its job already has as many attempts waiting for its concurrency
// as it may run at once (parked: more would only hold queue room that
// other jobs' attempts can use; they come in when the job has room again).
func (s *scheduler) accept(it *item) bool {
	if _, dup := s.inMem[it.id]; dup {
		return true
	}
	j := it.job
	if j.running+j.inReady >= j.limit && j.waiting.size >= j.limit {
		j.parked = true
		s.reloadFrom = min(s.reloadFrom, it.id-1)
		return false
	}
	if s.spilled || s.mem >= s.a.cfg.Queue.Size {
		if !s.spilled {
			s.log.Warn("ready queue full; further executions wait in SQLite", "size", s.a.cfg.Queue.Size)
		}
		s.spilled = true
		s.reloadFrom = min(s.reloadFrom, it.id-1)
		return false
	}
	it.enqueued = s.a.clk.Now()
	s.inMem[it.id] = it
	s.mem++
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
		if s.leaseMovedOn(it) {
			continue
		}
		s.busy++
		lag := now.Round(0).Sub(it.runAt)
		s.lags[s.lagN%len(s.lags)] = lag
		s.lagN++
		ctx, cancel := context.WithCancelCause(context.Background())
		s.running[it.id] = running{it: it, cancel: cancel, ctx: ctx}
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("dispatched", "job_id", j.id, "exec_row", it.id, "dequeued_at", now.Round(0), "lag", lag,
				"waited", now.Sub(it.enqueued))
		}
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
				if s.movedOn(it) {
					// Reloaded from SQLite, so checked only now that its row
					// is read: the job moved to a newer epoch meanwhile.
					s.freed()
					s.finishLeaseLost(it)
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

// reload reads spilled TRIGGERED rows back into memory, oldest first;
// rows of parked jobs stay (and take no room).
func (s *scheduler) reload() {
	room := s.a.cfg.Queue.Size - s.mem
	s.log.Debug("reloading spilled executions", "room", room, "in_memory", len(s.inMem))
	// Rows up to reloadFrom are in memory: scanning from there (not from
	// the first row) keeps a reload's cost to the rows it loads.
	after := s.reloadFrom
	s.reloadFrom = math.MaxInt64 // lowered by accept's refusals and an early stop
	loaded := 0
	for {
		limit := room + len(s.inMem)
		rows, err := s.a.st.LiveExecs(context.Background(), store.StateTriggered, after, limit)
		if err != nil {
			s.reloadFrom = min(s.reloadFrom, after)
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
				s.reloadFrom = min(s.reloadFrom, after)
				return
			}
			after = e.ID
			j := s.job(e.JobID)
			if e.Concurrency > 0 && j.assigned == nil {
				j.limit = e.Concurrency
			}
			s.spilled = false // accept must keep it
			// j.active counts it already (since it was triggered).
			if s.accept(&item{id: e.ID, job: j, prio: uint8(e.Priority), runAt: e.ScheduledAt, row: &e}) {
				loaded++
			}
		}
		if len(rows) < limit {
			// Every TRIGGERED row is in memory now.
			s.spilled = false
			return
		}
	}
}

// cancelledSpilled counts out an attempt cancelled while it was not in
// memory: a PENDING run (never counted) or a TRIGGERED attempt left in
// SQLite by a full ready queue, which j.active still counts. The cancel's
// write has finished the row already; its triggered_at tells the two apart.
func (s *scheduler) cancelledSpilled(rowID int64) {
	e, err := s.a.st.Exec(context.Background(), rowID)
	if err != nil {
		s.log.Error("read cancelled attempt", "exec_row", rowID, "err", err)
		return
	}
	if e.TriggeredAt.IsZero() {
		return
	}
	j := s.jobs[e.JobID]
	if j == nil || j.active == 0 {
		return
	}
	j.active--
	s.gc(j)
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
	// Hysteresis: a parked job comes back when half its waiting room is
	// free, so that each reload brings in many of its attempts (unparking
	// at every finish made a reload, a scan of the spilled rows, per
	// finished attempt).
	if j.parked && j.waiting.size <= j.limit/2 {
		j.parked = false
		s.spilled = true // its attempts left in SQLite may come in now
	}
	s.gc(j)
}

// freed runs when a worker slot is free again.
func (s *scheduler) freed() { s.busy-- }

// leaseMovedOn drops, without running it, an attempt fired under a group
// lease when the job has moved on since (see movedOn). Attempts reloaded
// from SQLite carry no row yet: start checks them once the row is read.
func (s *scheduler) leaseMovedOn(it *item) bool {
	if !s.movedOn(it) {
		return false
	}
	s.running[it.id] = running{it: it, cancel: func(error) {}} // a cancel meanwhile has nothing to stop
	s.finishLeaseLost(it)
	return true
}

// movedOn reports whether it was fired under a group lease of an epoch its
// job has moved past (unassigned here, or a newer epoch): the controller
// has taken that attempt to the new holder (agent_lost), so running it
// here too would run it twice.
func (s *scheduler) movedOn(it *item) bool {
	j := it.job
	return it.row != nil && it.row.Epoch > 0 && (j.assigned == nil || j.assigned.epoch > it.row.Epoch)
}

// finishLeaseLost finishes the attempt's row as lease_lost without running
// it and reports it fenced (dropFenced).
func (s *scheduler) finishLeaseLost(it *item) {
	s.dropFenced(it.id, fencedWhy(it.job), func() { s.done(it) })
}
