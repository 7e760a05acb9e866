package agent

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
	rep encodedReport
	// ins is set by the write: the row was inserted (not there already,
	// and the job still assigned).
	ins bool
}

// queueFire adds a fire to the scheduler's batch. The first fire of a
// batch posts its write, which therefore runs after every fire handled in
// the same pass over the inbox: one write function, so one transaction,
// for all of them.
func (s *scheduler) queueFire(f *fireRec) {
	s.fires = append(s.fires, f)
	if len(s.fires) == 1 {
		s.post(s.flushFires)
	}
}

// flushFires writes the batched fires in one write function: each fire's
// row (the TRIGGERED row is its ready-queue entry), its report and the
// job's last fire time. A fire whose job was deleted from the store
// meanwhile (unassigned) is left out. Once the batch is durable, each
// TRIGGERED fire enters the ready queue.
func (s *scheduler) flushFires() {
	batch := s.fires
	s.fires = nil
	if len(batch) == 0 {
		return
	}
	s.a.st.Submit(func(tx *store.Tx) error {
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
			if err := f.rep.enqueue(tx); err != nil {
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
			s.a.kickOutbox()
		}
		s.post(func() {
			for _, f := range batch {
				if f.row.State != store.StateTriggered {
					if err != nil {
						s.log.Error("record skipped fire", "exec_id", f.row.ExecID, "err", err)
					}
					continue
				}
				s.triggered(f.j, f.row, f.ins, err)
			}
		})
	})
}
