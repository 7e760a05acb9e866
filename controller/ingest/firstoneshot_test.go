package ingest

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestFirstOfOneShot: the first report of a pinned one-shot job's one
// execution, from its agent, once its time has come, may create the
// execution's record (a record the create held, or one a crash cut
// short); no other report of a one-shot job may.
func TestFirstOfOneShot(t *testing.T) {
	created := time.Date(2026, 12, 5, 8, 0, 0, 123456789, time.UTC) // a create's own time, to the nanosecond
	now := created.Add(time.Second)
	slack := 10 * time.Second
	asap := protocol.Job{ID: "j1", Handler: "noop", CreatedAt: created, Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-1"}}
	delayed := asap
	delayed.Schedule = schedule.Spec{Delay: "1h"}
	group := asap
	group.Target = protocol.Target{Group: "site=a"}
	paused := asap
	paused.Paused = true
	rep := func(j protocol.Job, at time.Time) protocol.Report {
		return protocol.Report{V: protocol.Version, Agent: "edge-1", JobID: j.ID, ExecID: protocol.ExecID(j.ID, at), Attempt: 1,
			Kind: protocol.ReportFinished, ScheduledAt: at, At: now}
	}
	ok := rep(asap, created)
	for _, tc := range []struct {
		name string
		job  protocol.Job
		r    func() protocol.Report
		want bool
	}{
		{"its agent, attempt 1, due", asap, func() protocol.Report { return ok }, true},
		{"scheduled to the millisecond, as ax-agent sends it", asap, func() protocol.Report {
			r := ok
			r.ScheduledAt = created.Truncate(time.Millisecond)
			return r
		}, true},
		{"another agent", asap, func() protocol.Report { r := ok; r.Agent = "edge-2"; return r }, false},
		{"attempt 2", asap, func() protocol.Report { r := ok; r.Attempt = 2; return r }, false},
		{"under an epoch", asap, func() protocol.Report { r := ok; r.Epoch = 3; return r }, false},
		{"with a shard slot", asap, func() protocol.Report { r := ok; r.Shard = &protocol.ShardSlot{Index: 0, Total: 2}; return r }, false},
		{"another exec id", asap, func() protocol.Report { return rep(asap, created.Add(time.Second)) }, false},
		{"its exec id, another scheduled time", asap, func() protocol.Report { r := ok; r.ScheduledAt = created.Add(time.Second); return r }, false},
		{"its exec id, a millisecond off", asap, func() protocol.Report { r := ok; r.ScheduledAt = created.Add(time.Millisecond); return r }, false},
		{"paused job", paused, func() protocol.Report { return ok }, false},
		{"group job", group, func() protocol.Report { return ok }, false},
		{"delayed, not due", delayed, func() protocol.Report { return rep(delayed, created.Add(time.Hour)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstOfOneShot(tc.job, tc.r(), now, slack); got != tc.want {
				t.Errorf("firstOfOneShot = %v, want %v", got, tc.want)
			}
		})
	}
	// Due within the agent's clock slack.
	soon := delayed
	soon.Schedule = schedule.Spec{Delay: "5s"}
	if !firstOfOneShot(soon, rep(soon, created.Add(5*time.Second)), now, slack) {
		t.Error("a fire 4 s ahead of the controller's clock, within the slack, refused")
	}
}
