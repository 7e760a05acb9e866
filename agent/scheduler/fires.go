package scheduler

import (
	"errors"

	"github.com/axsched/ax/agent/store"
)

// fireRec is one periodic fire waiting for the batch write (fireBatch):
// a TRIGGERED row, or a SKIPPED one (a run of fires skipped by overlap,
// skips.go).
type fireRec struct {
	j   *jobRef
	ref int64 // the job's store ref
	row *store.Exec
	rep Report
	// held, on a TRIGGERED fire, is the job's run of skipped fires not
	// reported yet (skips.go): written into the job's row with the fire,
	// because the fire moves last_fire past them.
	held *store.Skips
	// ins is set by the write: the row was inserted (not there already,
	// and the job still assigned).
	ins bool
}

// queueFire adds a fire to the scheduler's batch. The first fire of a
// batch posts its write, which therefore runs after every fire handled in
// the same pass over the inbox: one write function, so one transaction,
// for all of them.
func (t *trigger) queueFire(f *fireRec) {
	t.fires = append(t.fires, f)
	if len(t.fires) == 1 {
		t.env.mail.post(flushFires{})
	}
}

// flushFires writes the batched fires in one write function: each fire's
// row (the TRIGGERED row is its ready-queue entry), its report and the
// job's last fire time, and the job's held run of skipped fires: set with
// a TRIGGERED fire that carries it, cleared with the run's SKIPPED row. A
// fire whose job was deleted from the store meanwhile (unassigned) is
// left out. Once the batch is durable, each
// TRIGGERED fire enters the ready queue.
func (t *trigger) flushFires() {
	batch := t.fires
	t.fires = nil
	if len(batch) == 0 {
		return
	}
	t.env.cfg.Store.Submit(func(tx *store.Tx) error {
		specs := make(map[int64][]byte, 4)
		last := make(map[int64]*fireRec, 4)
		for _, f := range batch {
			f.ins = false
			if f.row.State == store.StateTriggered {
				spec, ok := specs[f.ref]
				if !ok {
					var err error
					spec, err = tx.JobSpec(f.ref)
					if errors.Is(err, store.ErrNotFound) {
						continue // unassigned meanwhile
					}
					if err != nil {
						return err
					}
					specs[f.ref] = spec
				}
				f.row.Spec = spec
			} else if err := tx.SetSkips(f.ref, store.Skips{}); err != nil {
				return err // the run is reported now: no longer held
			}
			id, ins, err := tx.InsertExec(*f.row)
			if err != nil {
				return err
			}
			if !ins {
				continue
			}
			if f.held != nil {
				if err := tx.SetSkips(f.ref, *f.held); err != nil {
					return err
				}
			}
			f.row.ID, f.ins = id, true
			if err := f.rep.Enqueue(tx); err != nil {
				return err
			}
			if l := last[f.ref]; l == nil || f.row.ScheduledAt.After(l.row.ScheduledAt) {
				last[f.ref] = f
			}
		}
		for ref, f := range last {
			if err := tx.SetLastFire(ref, f.row.ScheduledAt); err != nil {
				return err
			}
		}
		return nil
	}, func(err error) {
		if err == nil {
			t.env.host.KickOutbox()
		}
		t.env.mail.post(firesWritten{batch: batch, err: err})
	})
}

// firesWritten runs when a batch of fires is durable (or failed): each
// TRIGGERED fire enters the ready queue.
func (t *trigger) firesWritten(m firesWritten) {
	for _, f := range m.batch {
		if f.row.State != store.StateTriggered {
			if m.err != nil {
				t.env.cfg.Log.Error("record skipped fire", "exec_id", f.row.ExecID, "err", m.err)
			}
			continue
		}
		t.runs.triggered(f.j, f.row, nil, f.ins, m.err)
	}
}
