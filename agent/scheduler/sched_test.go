package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestGroupJobLease: a group job (mode any) fires only while the agent
// holds a lease of its epoch: not before the grant, up to (not at) the
// lease's end on the agent's monotonic clock, again after a heartbeat
// renewal (valid from when the heartbeat was sent), never after a revoke
// or with a stale epoch.
func TestGroupJobLease(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-g"), start)
	s := o.s
	j := groupJob("edge-g", "1s", protocol.ModeAny)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 3}})

	fired := func(at time.Time) bool { _, ok := o.row(protocol.ExecID(j.ID, at)); return ok }

	// No lease yet: the fire is dropped.
	if at := o.fireNext(j.ID); fired(at) {
		t.Fatalf("fired at %s without a lease", at)
	}
	if got := o.heldLeases(); len(got) != 0 {
		t.Fatalf("held leases without a grant: %v", got)
	}

	// A lease_grant command read from the stream proves nothing about the
	// present (it may be hours old): it moves the epoch but grants no time,
	// and asks the link for a heartbeat that claims the lease.
	o.apply(protocol.Command{Kind: protocol.CmdLeaseGrant, Lease: &protocol.Lease{JobID: j.ID, Epoch: 4, TTL: protocol.Duration(time.Hour)}})
	if s.trig.canFire(s.jobs.byID[j.ID]) {
		t.Fatal("a lease_grant command made the job fireable without a heartbeat reply")
	}
	if got := s.jobs.byID[j.ID].assigned.epoch; got != 4 {
		t.Fatalf("epoch after lease_grant = %d, want 4", got)
	}
	select {
	case <-o.host.hbKick:
	default:
		t.Fatal("lease_grant did not ask for a heartbeat")
	}
	if got := s.ClaimedLeases(); len(got) != 1 || got[0].Epoch != 4 {
		t.Fatalf("claimed leases = %v, want the job at epoch 4", got)
	}
	if at := o.fireNext(j.ID); fired(at) {
		t.Fatalf("fired at %s on a lease_grant command alone", at)
	}

	// Granted by a heartbeat reply for 2.5 s from the send: the next fires run.
	s.leaseGranted(j.ID, 4, o.clk.Now(), 2500*time.Millisecond)
	until := s.jobs.byID[j.ID].assigned.leaseUntil
	if want := o.clk.Now().Add(2500 * time.Millisecond); !until.Equal(want) {
		t.Fatalf("lease until %s, want %s", until, want)
	}
	if got := o.heldLeases(); len(got) != 1 || got[0].JobID != j.ID || got[0].Epoch != 4 {
		t.Fatalf("held leases = %v", got)
	}
	var last time.Time
	for s.trig.deadline(s.jobs.byID[j.ID].assigned.next).Before(until) {
		last = o.fireNext(j.ID)
		if !fired(last) {
			t.Fatalf("fire at %s inside the lease did not run", last)
		}
	}
	// The lease lapses on the monotonic clock: one nanosecond before its
	// end it is valid, at its end it is not.
	o.clk.Set(until.Add(-time.Nanosecond))
	if !s.trig.canFire(s.jobs.byID[j.ID]) {
		t.Fatal("lease not valid 1ns before its end")
	}
	o.clk.Set(until)
	if s.trig.canFire(s.jobs.byID[j.ID]) {
		t.Fatal("lease still valid at its end")
	}
	if at := o.fireNext(j.ID); fired(at) {
		t.Fatalf("fired at %s after the lease lapsed", at)
	}

	// A heartbeat renewal: valid for TTL from when the heartbeat was sent.
	sent := o.clk.Now().Add(-200 * time.Millisecond)
	s.leaseGranted(j.ID, 4, sent, 2*time.Second)
	if got := s.jobs.byID[j.ID].assigned.leaseUntil; !got.Equal(sent.Add(2 * time.Second)) {
		t.Fatalf("renewed until %s, want %s (from the send time)", got, sent.Add(2*time.Second))
	}
	if at := o.fireNext(j.ID); !fired(at) {
		t.Fatalf("fire at %s after renewal did not run", at)
	}

	// A stale epoch neither renews nor revokes.
	s.leaseGranted(j.ID, 3, o.clk.Now(), time.Hour)
	if got := s.jobs.byID[j.ID].assigned.leaseUntil; !got.Equal(sent.Add(2 * time.Second)) {
		t.Fatalf("stale epoch changed the lease to %s", got)
	}
	s.leaseRevoked(j.ID, 3)
	if !s.trig.canFire(s.jobs.byID[j.ID]) {
		t.Fatal("stale epoch revoked the lease")
	}

	// Revoked: stops at once, although the TTL has not run out.
	o.apply(protocol.Command{Kind: protocol.CmdLeaseRevoke, Lease: &protocol.Lease{JobID: j.ID, Epoch: 4}})
	if at := o.fireNext(j.ID); fired(at) {
		t.Fatalf("fired at %s after revoke", at)
	}
	if got := o.heldLeases(); len(got) != 0 {
		t.Fatalf("held leases after revoke: %v", got)
	}
}

// TestMisfireAtStart: an agent down for 10½ periods of an every-1m job
// restarts; the job's misfire policy decides what runs.
func TestMisfireAtStart(t *testing.T) {
	tests := []struct {
		policy      schedule.MisfirePolicy
		wantRun     int // fires triggered at start (the newest ones)
		wantSkipped bool
	}{
		{schedule.FireAll, 10, false},
		{schedule.FireOnce, 1, true},
		{schedule.Skip, 0, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.policy), func(t *testing.T) {
			cfg := offlineConfig(t, "edge-m")
			start := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
			o := newOffline(t, cfg, start)
			j := protocoltest.NewJob("edge-m", "noop", schedule.Spec{Every: "1m"}, nil)
			j.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			j.Misfire = protocol.MisfireSpec{Policy: string(tc.policy), Grace: protocol.Duration(time.Second), Cap: 100}
			j.Overlap, j.Concurrency = protocol.OverlapAllow, 20 // none is skipped as an overlap
			o.apply(protocoltest.AssignCmd(j))
			first := o.s.jobs.byID[j.ID].assigned.next
			must(t, o.st.Close())

			// Back after 10½ minutes: fires first … first+9m were missed.
			o2 := newOffline(t, cfg, first.Add(9*time.Minute+30*time.Second))
			must(t, o2.s.Recover(context.Background()))
			o2.sync()
			var ran []time.Time
			skipped := 0
			for i := range 10 {
				at := first.Add(time.Duration(i) * time.Minute)
				e, ok := o2.row(protocol.ExecID(j.ID, at))
				if !ok {
					continue
				}
				switch e.State {
				case store.StateTriggered:
					ran = append(ran, at)
				case store.StateSkipped:
					skipped++
				default:
					t.Fatalf("fire %s in state %s", at, e.State)
				}
			}
			if len(ran) != tc.wantRun {
				t.Fatalf("%d missed fires triggered (%v), want %d", len(ran), ran, tc.wantRun)
			}
			if tc.wantRun > 0 && !ran[len(ran)-1].Equal(first.Add(9*time.Minute)) {
				t.Fatalf("the newest missed fire did not run: %v", ran)
			}
			if (skipped == 1) != tc.wantSkipped || skipped > 1 {
				t.Fatalf("%d SKIPPED records, want skipped=%v", skipped, tc.wantSkipped)
			}
			// The next fire is planned after now.
			if next := o2.s.jobs.byID[j.ID].assigned.next; !next.Equal(first.Add(10 * time.Minute)) {
				t.Fatalf("next fire %s, want %s", next, first.Add(10*time.Minute))
			}
		})
	}
}

// TestBroadcastExecIDs: a broadcast (mode all) job's fires carry the
// agent's shard in the exec id, the row and the report.
func TestBroadcastExecIDs(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-b"), start)
	j := groupJob("edge-b", "1s", protocol.ModeAll)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Shard: &protocol.ShardSlot{Index: 2, Total: 3}}})
	at := o.fireNext(j.ID)
	id := protocol.BroadcastExecID(j.ID, at, 2)
	e, ok := o.row(id)
	if !ok {
		t.Fatalf("no attempt %s", id)
	}
	if e.ShardIndex != 2 || e.ShardTotal != 3 {
		t.Fatalf("row shard %d/%d", e.ShardIndex, e.ShardTotal)
	}
	if _, plain := o.row(protocol.ExecID(j.ID, at)); plain {
		t.Fatal("a non-broadcast exec id was used too")
	}
	msgs, err := o.st.Outbox(context.Background(), 0, 10)
	must(t, err)
	var found bool
	for _, m := range msgs {
		r, err := protocol.DecodeReport(m.Data)
		must(t, err)
		if r.ExecID == id {
			found = true
			if r.Shard == nil || r.Shard.Index != 2 || r.Shard.Total != 3 {
				t.Fatalf("report shard %+v", r.Shard)
			}
		}
	}
	if !found {
		t.Fatal("no report of the broadcast fire in the outbox")
	}
}

// TestUnassignStopsFiring: after unassign, a fire already on the wheel is
// stale and the job is forgotten (store and scheduler).
func TestUnassignStopsFiring(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-u"), start)
	s := o.s
	j := protocoltest.NewJob("edge-u", "noop", schedule.Spec{Every: "1s"}, nil)
	o.apply(protocoltest.AssignCmd(j))
	aj := s.jobs.byID[j.ID].assigned
	w := wheelItem{id: aj.ref, seq: uint32(aj.planSeq)}
	at := aj.next
	o.apply(protocol.Command{Kind: protocol.CmdUnassign, Unassign: &protocol.Unassign{JobID: j.ID}})
	if _, err := o.st.Job(context.Background(), j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job still stored: %v", err)
	}
	if _, ok := s.jobs.byID[j.ID]; ok {
		t.Fatal("scheduler still knows the job")
	}
	o.clk.Set(s.trig.deadline(at))
	s.trig.fire(w)
	o.sync()
	if _, ok := o.row(protocol.ExecID(j.ID, at)); ok {
		t.Fatal("an unassigned job fired")
	}
}

// TestLateOlderAssignAfterUnassign: an assign of an older generation
// that arrives after the unassign that took the job away (commands of two
// controller replicas crossing) neither stores the job nor plans it; one
// of the unassign's generation does.
func TestLateOlderAssignAfterUnassign(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-l"), start)
	s := o.s
	j := protocoltest.NewJob("edge-l", "noop", schedule.Spec{Every: "1s"}, nil)
	j.Generation = 1
	o.apply(protocoltest.AssignCmd(j))
	o.apply(protocol.Command{Kind: protocol.CmdUnassign, Unassign: &protocol.Unassign{JobID: j.ID, Generation: 2}})
	o.apply(protocoltest.AssignCmd(j)) // generation 1 again, late
	if _, err := o.st.Job(context.Background(), j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the late assign of generation 1 stored the job again: %v", err)
	}
	if _, ok := s.jobs.byID[j.ID]; ok {
		t.Fatal("the late assign of generation 1 planned the job again")
	}
	j.Generation = 2
	o.apply(protocoltest.AssignCmd(j))
	if got, err := o.st.Job(context.Background(), j.ID); err != nil || got.Generation != 2 {
		t.Fatalf("assign of generation 2: %+v, %v", got, err)
	}
	if s.jobs.byID[j.ID] == nil || s.jobs.byID[j.ID].assigned == nil {
		t.Fatal("assign of generation 2 not planned")
	}
}

// TestSlowStartAfterRestart: executions left TRIGGERED by a stop are
// reloaded at start and dispatched to half the workers until the backlog
// drains; then all workers are used.
func TestSlowStartAfterRestart(t *testing.T) {
	cfg := offlineConfig(t, "edge-w")
	cfg.Workers = 4
	cfg.Queue.Size = 16
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	j := protocoltest.NewJob("edge-w", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 8
	for i := range 6 {
		o.apply(protocoltest.RunCmd(j, 1, start.Add(-time.Duration(i+1)*time.Second)))
	}
	must(t, o.st.Close())

	o2 := newOffline(t, cfg, start.Add(time.Minute))
	s := o2.s
	must(t, o2.s.Recover(context.Background()))
	if !s.runs.slowStart || !s.runs.spilled {
		t.Fatalf("slowStart=%v spilled=%v after a restart with a backlog", s.runs.slowStart, s.runs.spilled)
	}
	s.runs.pump()
	o2.sync()
	if s.runs.busy != 2 {
		t.Fatalf("%d dispatched during slow start, want 2 (workers/2)", s.runs.busy)
	}
	// Finish the two running ones: still slow start while 4 wait.
	finish := func() {
		for id, r := range s.runs.running {
			<-s.runs.work
			s.runs.busy--
			s.runs.done(r.it)
			delete(s.runs.running, id)
		}
	}
	finish()
	s.runs.pump()
	o2.sync()
	if s.runs.busy != 2 || !s.runs.slowStart {
		t.Fatalf("busy=%d slowStart=%v with a backlog of %d", s.runs.busy, s.runs.slowStart, s.runs.ready.len())
	}
	finish()
	s.runs.pump()
	o2.sync()
	finish()
	s.runs.pump() // backlog drained: all workers from now on
	if s.runs.slowStart {
		t.Fatal("still in slow start after the backlog drained")
	}
}

// TestRetentionPrunes: final executions older than store.retention are
// deleted on the prune timer; younger and live ones stay.
func TestRetentionPrunes(t *testing.T) {
	cfg := offlineConfig(t, "edge-r")
	cfg.Store.Retention = time.Hour
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	jobID := protocoltest.NewJob("edge-r", "noop", schedule.Spec{Asap: true}, nil).ID
	rows := []struct {
		name     string
		state    string
		finished time.Time
		kept     bool
	}{
		{"old final", store.StateFinished, start.Add(-2 * time.Hour), false},
		{"old skipped", store.StateSkipped, start.Add(-90 * time.Minute), false},
		{"young final", store.StateFinished, start.Add(-30 * time.Minute), true},
		{"live", store.StateTriggered, time.Time{}, true},
	}
	ids := make([]string, len(rows))
	must(t, o.st.Do(context.Background(), func(tx *store.Tx) error {
		for i, r := range rows {
			at := start.Add(-3*time.Hour + time.Duration(i)*time.Minute)
			ids[i] = protocol.ExecID(jobID, at)
			if _, _, err := tx.InsertExec(store.Exec{ExecID: ids[i], Attempt: 1, JobID: jobID, State: r.state,
				ScheduledAt: at, RunAt: at, ShardIndex: -1, FinishedAt: r.finished}); err != nil {
				return err
			}
		}
		return nil
	}))
	o.s.onTick() // the first tick prunes
	o.sync()
	for i, r := range rows {
		if _, ok := o.row(ids[i]); ok != r.kept {
			t.Errorf("%s: kept=%v, want %v", r.name, ok, r.kept)
		}
	}
	// The next prune waits for store.prune_interval.
	if !o.s.lastPrune.Equal(o.clk.Now()) {
		t.Fatalf("lastPrune %s", o.s.lastPrune)
	}
}

// TestRunFencedByGroupLease: a run sent under a group lease (a retry to
// the job's holder) fires only while the agent holds the lease at the
// run's epoch: it waits while the lease is not valid, fires once granted,
// and is dropped, reported fenced, once the job moved to a newer epoch.
func TestRunFencedByGroupLease(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, offlineConfig(t, "edge-f"), start)
	s := o.s
	j := groupJob("edge-f", "1h", protocol.ModeAny)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 3}})
	x := protocol.ExecID(j.ID, start.Add(-time.Minute))
	runRow := func(attempt int) store.Exec {
		t.Helper()
		e, err := o.st.ExecByID(context.Background(), x, attempt)
		must(t, err)
		return e
	}
	o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: x, Attempt: 2, RunAt: start, Epoch: 3}})
	e := runRow(2)
	if e.State != store.StatePending {
		t.Fatalf("a due run under a lease was stored %s, want PENDING (it waits for the wheel and the lease)", e.State)
	}

	// No lease yet: the fire waits.
	s.trig.fire(wheelItem{id: e.ID})
	o.sync()
	if got := runRow(2).State; got != store.StatePending {
		t.Fatalf("run fired without the lease: %s", got)
	}
	if _, ok := s.runs.fenced[e.ID]; !ok {
		t.Fatal("waiting run forgotten")
	}

	// Granted: it fires.
	s.leaseGranted(j.ID, 3, o.clk.Now(), 2*time.Second)
	s.trig.fire(wheelItem{id: e.ID})
	o.sync()
	if got := runRow(2).State; got == store.StatePending {
		t.Fatal("run did not fire under its lease")
	}

	// A run of epoch 3 when the job has moved on to epoch 5: dropped.
	o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: x, Attempt: 3, RunAt: start, Epoch: 3}})
	e3 := runRow(3)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 5}})
	outbox := func() int {
		c, err := o.st.Counts(context.Background())
		must(t, err)
		return c.Outbox
	}
	before := outbox()
	s.trig.fire(wheelItem{id: e3.ID})
	o.sync()
	got := runRow(3)
	if got.State != store.StateFinished || got.Outcome != "lease_lost" {
		t.Fatalf("stale run: state %s outcome %q, want finished lease_lost", got.State, got.Outcome)
	}
	if after := outbox(); after != before+1 {
		t.Fatalf("dropped run not reported fenced once: outbox %d → %d", before, after)
	}
}

// TestQueuedAttemptDroppedWhenLeaseMovedOn: an attempt fired under a group
// lease and still waiting for a worker — in memory, or reloaded from
// SQLite (spilled, or found at a restart; its row is read only when it is
// started) — is not run once the job has moved to a newer epoch: the
// controller has taken it to the new holder.
func TestQueuedAttemptDroppedWhenLeaseMovedOn(t *testing.T) {
	for _, reloaded := range []bool{false, true} {
		t.Run(map[bool]string{false: "in memory", true: "reloaded"}[reloaded], func(t *testing.T) {
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			o := newOffline(t, offlineConfig(t, "edge-q"), start)
			s := o.s
			j := groupJob("edge-q", "1s", protocol.ModeAny)
			o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 3}})
			s.leaseGranted(j.ID, 3, o.clk.Now(), time.Hour)
			s.runs.busy = s.runs.workers // every worker busy: the fire waits in the ready queue
			at := o.fireNext(j.ID)
			e, ok := o.row(protocol.ExecID(j.ID, at))
			if !ok || e.State != store.StateTriggered || e.Epoch != 3 {
				t.Fatalf("fired attempt %+v (found %t), want TRIGGERED at epoch 3", e, ok)
			}
			if reloaded {
				it := s.runs.inMem[e.ID]
				if it == nil {
					t.Fatal("fired attempt not queued")
				}
				it.row = nil // as reloaded from SQLite
			}
			o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 5}})
			s.runs.busy = 0
			s.runs.pump()
			o.sync()
			o.sync() // a reloaded attempt's drop is a second write, posted by the first one's callback
			e, _ = o.row(e.ExecID)
			if e.State != store.StateFinished || e.Outcome != "lease_lost" {
				t.Fatalf("queued attempt of a lease that moved on: state %s outcome %q, want finished lease_lost", e.State, e.Outcome)
			}
			select {
			case u := <-s.runs.work:
				t.Fatalf("the attempt went to a worker: %d", u.it.id)
			default:
			}
			if len(s.runs.running) != 0 || s.runs.busy != 0 {
				t.Fatalf("dropped attempt still counted: running %d, busy %d", len(s.runs.running), s.runs.busy)
			}
		})
	}
}
