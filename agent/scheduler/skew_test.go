package scheduler

import (
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestOnSkewAdopt: with on_skew adopt, an offset beyond max_skew plans
// fires on controller time (exec ids carry it) instead of refusing; with
// refuse nothing fires.
func TestOnSkewAdopt(t *testing.T) {
	for _, policy := range []string{SkewAdopt, SkewRefuse} {
		t.Run(policy, func(t *testing.T) {
			cfg := offlineConfig(t, "edge-a")
			cfg.Clock.OnSkew = policy
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			o := newOffline(t, cfg, start)
			s := o.s
			j := protocoltest.NewJob("edge-a", "noop", schedule.Spec{Every: "1s"}, nil)
			j.CreatedAt = start.Add(-time.Hour)
			o.apply(protocoltest.AssignCmd(j))
			o.host.offset.Store(int64(time.Hour)) // the controller is an hour ahead (no RTC here)
			s.trig.checkSkew()
			if s.trig.adopt != (policy == SkewAdopt) || s.trig.skewRefusing != (policy == SkewRefuse) {
				t.Fatalf("adopt=%v refusing=%v", s.trig.adopt, s.trig.skewRefusing)
			}
			ctlNow := o.clk.Now().Add(time.Hour)
			if policy == SkewRefuse {
				// Planned, but the fire is refused.
				at := o.fireNext(j.ID)
				if _, ok := o.row(protocol.ExecID(j.ID, at)); ok {
					t.Fatal("fired under refuse")
				}
				return
			}
			next := s.jobs.byID[j.ID].assigned.next
			if next.Before(ctlNow) || next.After(ctlNow.Add(time.Second)) {
				t.Fatalf("next fire %s is not the next second of controller time %s", next, ctlNow)
			}
			// The wheel deadline is a second away on the agent's clock.
			if d := s.trig.deadline(next).Sub(o.clk.Now()); d < 0 || d > time.Second {
				t.Fatalf("deadline %s away", d)
			}
			at := o.fireNext(j.ID)
			e, ok := o.row(protocol.ExecID(j.ID, at))
			if !ok || !e.ScheduledAt.Equal(at) || e.State != store.StateTriggered {
				t.Fatalf("fire on controller time %s: row %+v (found %v)", at, e, ok)
			}
		})
	}
}

// TestRunAppliedRightAfterSkewCheckRefused: a run command applied right
// after a registration measured an offset over max_skew (on_skew refuse)
// is stored PENDING, not TRIGGERED, although the scheduler goroutine has
// not handled the skew check yet (Apply runs on the link's goroutine).
func TestRunAppliedRightAfterSkewCheckRefused(t *testing.T) {
	cfg := offlineConfig(t, "edge-s")
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	j := protocoltest.NewJob("edge-s", "noop", schedule.Spec{Asap: true}, nil)
	j.CreatedAt = start
	o.host.offset.Store(int64(time.Hour))
	o.s.CheckSkew() // posted, not handled: the test goroutine is the scheduler's
	run := protocoltest.RunCmd(j, 1, start)
	o.apply(run)
	e, ok := o.row(run.Run.ExecID)
	if !ok {
		t.Fatal("run not stored")
	}
	if e.State != store.StatePending {
		t.Fatalf("run stored %s under refuse, want PENDING", e.State)
	}
}
