package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// outboxReports returns the reports in the outbox that keep says to.
func outboxReports(t *testing.T, o *offline, keep func(protocol.Report) bool) []protocol.Report {
	t.Helper()
	msgs, err := o.st.Outbox(context.Background(), 0, 1000)
	must(t, err)
	var out []protocol.Report
	for _, m := range msgs {
		r, err := protocol.DecodeReport(m.Data)
		must(t, err)
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// fencedReports returns the fenced reports in the outbox.
func fencedReports(t *testing.T, o *offline) []protocol.Report {
	t.Helper()
	return outboxReports(t, o, func(r protocol.Report) bool { return r.Kind == protocol.ReportFenced })
}

// heldGroupJob starts an offline scheduler for agent at start with a group
// job (mode any, every 1s) assigned at epoch 3 and its lease held.
func heldGroupJob(t *testing.T, agent string, start time.Time) (*offline, protocol.Job) {
	t.Helper()
	o := newOffline(t, offlineConfig(t, agent), start)
	j := groupJob(agent, "1s", protocol.ModeAny)
	o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 3}})
	o.s.leaseGranted(j.ID, 3, o.clk.Now(), time.Hour)
	return o, j
}

// TestFencedDropsReported: an attempt the agent drops unrun because its
// group job's lease moved on — a run (retry) sent under the old epoch, or
// a fire still queued for a worker — is reported fenced with its exec id,
// attempt and epoch, in the transaction that finishes its row, so that
// the controller moves it on instead of waiting for it for ever.
func TestFencedDropsReported(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		unassign bool
	}{{"newer epoch", false}, {"unassigned", true}} {
		t.Run(tc.name, func(t *testing.T) {
			o, j := heldGroupJob(t, "edge-f", start)
			s := o.s
			// A retry sent under epoch 3, and a fire queued behind busy workers.
			x := protocol.ExecID(j.ID, start.Add(-time.Minute))
			o.apply(protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: x, Attempt: 2, RunAt: start.Add(time.Hour), Epoch: 3}})
			run, err := o.st.ExecByID(context.Background(), x, 2)
			must(t, err)
			s.runs.busy = s.runs.workers
			at := o.fireNext(j.ID)
			fire, ok := o.row(protocol.ExecID(j.ID, at))
			if !ok || fire.State != store.StateTriggered {
				t.Fatalf("fire %+v (found %t), want TRIGGERED", fire, ok)
			}
			if tc.unassign {
				o.apply(protocol.Command{Kind: protocol.CmdUnassign, Unassign: &protocol.Unassign{JobID: j.ID, Generation: j.Generation}})
			} else {
				o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 5}})
			}
			s.runs.busy = 0
			s.runs.pump()
			s.trig.fire(wheelItem{id: run.ID})
			o.sync()
			o.sync()
			want := map[string]int{x: 2, fire.ExecID: 1}
			got := fencedReports(t, o)
			if len(got) != len(want) {
				t.Fatalf("fenced reports %+v, want one for %v", got, want)
			}
			for _, r := range got {
				if want[r.ExecID] != r.Attempt || r.Epoch != 3 || r.Agent != "edge-f" || r.Reason != map[bool]string{false: fencedNewerEpoch, true: fencedUnassigned}[tc.unassign] {
					t.Errorf("fenced report %+v, want attempt %d under epoch 3", r, want[r.ExecID])
				}
			}
			for _, id := range []int64{run.ID, fire.ID} {
				e, err := o.st.Exec(context.Background(), id)
				must(t, err)
				if e.State != store.StateFinished || e.Outcome != "lease_lost" {
					t.Errorf("dropped attempt %s/%d: state %s outcome %q, want finished lease_lost", e.ExecID, e.Attempt, e.State, e.Outcome)
				}
			}
		})
	}
}

// TestFencedWhileWaitingForWorker: an attempt of a group job dispatched
// (RUNNING, handed to the work channel) whose lease moves on before a
// worker takes it — a newer epoch, or the job unassigned — is not run by
// the worker that takes it: its row is finished lease_lost and it is
// reported fenced, its slot freed; the same attempt taken before the
// lease moved runs.
func TestFencedWhileWaitingForWorker(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		move func(o *offline, j protocol.Job)
	}{
		{"newer epoch by assign", func(o *offline, j protocol.Job) {
			o.apply(protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j, Epoch: 5}})
		}},
		{"newer epoch by lease grant", func(o *offline, j protocol.Job) {
			o.apply(protocol.Command{Kind: protocol.CmdLeaseGrant, Lease: &protocol.Lease{JobID: j.ID, Epoch: 4, TTL: protocol.Duration(time.Minute)}})
		}},
		{"unassigned", func(o *offline, j protocol.Job) {
			o.apply(protocol.Command{Kind: protocol.CmdUnassign, Unassign: &protocol.Unassign{JobID: j.ID, Generation: j.Generation}})
		}},
		{"not moved", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, j := heldGroupJob(t, "edge-w", start)
			s := o.s
			at := o.fireNext(j.ID)
			s.runs.pump()
			o.sync()
			var u workUnit
			select {
			case u = <-s.runs.work:
			default:
				t.Fatal("the fire was not handed to a worker")
			}
			if u.it.row == nil || u.it.row.ExecID != protocol.ExecID(j.ID, at) || u.it.row.Epoch != 3 {
				t.Fatalf("unit %+v, want the fire of %s under epoch 3", u.it.row, at)
			}
			if tc.move != nil {
				tc.move(o, j)
			}
			(&worker{env: s.env}).runOne(u, &specCache{})
			o.sync()
			o.sync()
			e, ok := o.row(u.it.row.ExecID)
			if !ok {
				t.Fatal("the fire's row is gone")
			}
			if tc.move == nil {
				if e.State != store.StateFinished || e.Outcome != "success" || len(fencedReports(t, o)) != 0 {
					t.Fatalf("not moved: %s %q, %d fenced reports; want finished success, none", e.State, e.Outcome, len(fencedReports(t, o)))
				}
				return
			}
			if e.State != store.StateFinished || e.Outcome != "lease_lost" {
				t.Fatalf("row %s %q, want finished lease_lost (not run)", e.State, e.Outcome)
			}
			got := fencedReports(t, o)
			if len(got) != 1 || got[0].ExecID != e.ExecID || got[0].Epoch != 3 {
				t.Fatalf("fenced reports %+v, want one for %s under epoch 3", got, e.ExecID)
			}
			if s.runs.busy != 0 || len(s.runs.running) != 0 {
				t.Fatalf("busy %d, running %d after the drop; want 0, 0", s.runs.busy, len(s.runs.running))
			}
		})
	}
}
