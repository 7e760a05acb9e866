package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestFiresOfOnePassShareOneWrite: the wheel's due fires handled in one
// pass of the scheduler are written by one write function (one
// transaction): each fire's TRIGGERED row, its report and the job's last
// fire time together.
func TestFiresOfOnePassShareOneWrite(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-f"), start)
	s := o.s
	const n = 50
	jobs := make([]protocol.Job, n)
	for i := range jobs {
		jobs[i] = protocoltest.NewJob("edge-f", "noop", schedule.Spec{Every: "1s"}, nil)
		jobs[i].CreatedAt = start.Add(-time.Hour)
		o.apply(protocoltest.AssignCmd(jobs[i]))
	}
	at := s.jobs.byID[jobs[0].ID].assigned.next
	for _, j := range jobs {
		if got := s.jobs.byID[j.ID].assigned.next; !got.Equal(at) {
			t.Fatalf("job %s next fire %s, want %s", j.ID, got, at)
		}
	}
	before := o.st.Stats()
	o.clk.Set(s.trig.deadline(at))
	// What the wheel delivers in one pass: every due item.
	for _, j := range jobs {
		aj := s.jobs.byID[j.ID].assigned
		s.trig.fire(wheelItem{id: aj.ref, seq: uint32(aj.planSeq), prio: uint8(aj.job.Priority)})
	}
	o.sync()
	after := o.st.Stats()
	for _, j := range jobs {
		e, ok := o.row(protocol.ExecID(j.ID, at))
		if !ok || e.State != "TRIGGERED" {
			t.Fatalf("fire of %s: row %+v (found %v), want TRIGGERED", j.ID, e, ok)
		}
		sj, err := o.st.Job(context.Background(), j.ID)
		must(t, err)
		if !sj.LastFire.Equal(at) {
			t.Fatalf("job %s last fire %s, want %s", j.ID, sj.LastFire, at)
		}
	}
	// One more write is the sync's own empty one.
	if w := after.Writes - before.Writes - 1; w != 1 {
		t.Fatalf("%d fires took %d write functions, want 1", n, w)
	}
	cnt, err := o.st.Counts(context.Background())
	must(t, err)
	if cnt.Outbox != n {
		t.Fatalf("outbox has %d reports, want %d (one triggered report per fire)", cnt.Outbox, n)
	}
}
