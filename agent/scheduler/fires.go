package scheduler

import (
	"errors"

	"github.com/axsched/ax/agent/store"
)

// fireRec is one periodic fire waiting for the batch write (fireBatch):
// a TRIGGERED row, or a SKIPPED one (overlap).
type fireRec struct {
	j   *jobRef
	ref int64 // the job's store ref
	row *store.Exec
	rep Report
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
// job's last fire time. A fire whose job was deleted from the store
// meanwhile (unassigned) is left out. Once the batch is durable, each
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
			}
			id, ins, err := tx.InsertExec(*f.row)
			if err != nil {
				return err
			}
			if !ins {
				continue
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
