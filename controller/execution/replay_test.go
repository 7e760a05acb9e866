package execution

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestReplayGroups: a duplicate report re-publishes the events of the
// reports that first applied its steps, one per report as Ends records it
// (protocol.Event.Via), whichever steps the duplicate stands for; a record
// of a version without Ends replays one event per step.
func TestReplayGroups(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261203120000-abcdef"
	exec := protocol.ExecID(job, now)
	tAt, sAt, fAt := now.Add(time.Millisecond), now.Add(2*time.Millisecond), now.Add(5*time.Millisecond)
	rep := func(kind protocol.ReportKind, coalesced bool) protocol.Report {
		r := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: 1, Kind: kind, ScheduledAt: now}
		switch kind {
		case protocol.ReportTriggered:
			r.At = tAt
		case protocol.ReportRunning:
			r.At = sAt
		case protocol.ReportFinished:
			r.At, r.Outcome, r.Result = fAt, retry.OutcomeSuccess, &retry.Result{}
		}
		if coalesced {
			if kind != protocol.ReportTriggered {
				r.TriggeredAt = tAt
			}
			if kind == protocol.ReportFinished {
				r.StartedAt = sAt
			}
		}
		return r
	}
	T, R, F := protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished
	pol := func() retry.Policy { return retry.Policy{MaxAttempts: 1} }
	pending := &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: 1, State: protocol.StatePending, Agent: "a1"}}

	tests := []struct {
		name    string
		applied []protocol.Report // applied in order to the PENDING record
		legacy  bool              // drop Ends, as a record of an older version
		ends    uint8
		dup     protocol.Report
		want    string // the replayed events: from>via>to, "|" between events
	}{
		{name: "one report, the same again", applied: []protocol.Report{rep(F, true)}, ends: 0b100,
			dup: rep(F, true), want: "PENDING>TRIGGERED>RUNNING>SUCCESS"},
		{name: "one report, a stray running", applied: []protocol.Report{rep(F, true)}, ends: 0b100,
			dup: rep(R, false), want: "PENDING>TRIGGERED>RUNNING>SUCCESS"},
		{name: "one report, a stray triggered", applied: []protocol.Report{rep(F, true)}, ends: 0b100,
			dup: rep(T, false), want: "PENDING>TRIGGERED>RUNNING>SUCCESS"},
		{name: "triggered alone, then the rest", applied: []protocol.Report{rep(T, false), rep(F, true)}, ends: 0b101,
			dup: rep(F, true), want: "PENDING>TRIGGERED|TRIGGERED>RUNNING>SUCCESS"},
		{name: "triggered alone, then the rest, triggered again", applied: []protocol.Report{rep(T, false), rep(F, true)}, ends: 0b101,
			dup: rep(T, false), want: "PENDING>TRIGGERED"},
		{name: "running coalesced, then finished", applied: []protocol.Report{rep(R, true), rep(F, false)}, ends: 0b110,
			dup: rep(F, true), want: "PENDING>TRIGGERED>RUNNING|RUNNING>SUCCESS"},
		{name: "each step its own report", applied: []protocol.Report{rep(T, false), rep(R, false), rep(F, false)}, ends: 0b111,
			dup: rep(R, false), want: "TRIGGERED>RUNNING"},
		{name: "a record of an older version", applied: []protocol.Report{rep(F, true)}, legacy: true,
			dup: rep(F, true), want: "PENDING>TRIGGERED|TRIGGERED>RUNNING|RUNNING>SUCCESS"},
		{name: "an older version's step, then a report of this one", applied: []protocol.Report{rep(T, false), rep(F, true)}, legacy: true,
			ends: 0b101, dup: rep(F, true), want: "PENDING>TRIGGERED|TRIGGERED>RUNNING>SUCCESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := pending
			for i, r := range tt.applied {
				next, _, err := Apply(cur, Report{Report: r}, Env{Now: now, Policy: pol})
				if err != nil {
					t.Fatalf("report %d: %v", i, err)
				}
				if tt.legacy && i == 0 {
					next.Ends = 0
				}
				cur = next
			}
			if cur.Ends != tt.ends {
				t.Errorf("ends %03b, want %03b", cur.Ends, tt.ends)
			}
			_, effs, err := Apply(cur, Report{Report: tt.dup}, Env{Now: now, Policy: pol})
			if sentinel(err) != ErrDuplicate {
				t.Fatalf("duplicate: %v", err)
			}
			var events []string
			var ev []string
			for _, e := range effs {
				re, ok := e.(ReplayEvent)
				if !ok {
					t.Fatalf("effect %T", e)
				}
				if len(ev) == 0 {
					ev = append(ev, string(re.T.From))
				}
				ev = append(ev, string(re.T.To))
				if re.End {
					events = append(events, strings.Join(ev, ">"))
					ev = nil
				}
			}
			if len(ev) != 0 {
				t.Errorf("replay does not end an event: %v", ev)
			}
			if got := strings.Join(events, "|"); got != tt.want {
				t.Errorf("replayed %s, want %s", got, tt.want)
			}
		})
	}
}

// TestReplayEndsMatchApply: for every way an agent can split an attempt's
// three steps into reports, the same reports again replay exactly the
// groups (from, via, to) that applying them made.
func TestReplayEndsMatchApply(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261203120000-abcdef"
	exec := protocol.ExecID(job, now)
	base := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: 1, ScheduledAt: now}
	trig := base
	trig.Kind, trig.At = protocol.ReportTriggered, now.Add(time.Millisecond)
	run := base
	run.Kind, run.At = protocol.ReportRunning, now.Add(2*time.Millisecond)
	runT := run
	runT.TriggeredAt = trig.At
	fin := base
	fin.Kind, fin.At, fin.Outcome, fin.Result = protocol.ReportFinished, now.Add(3*time.Millisecond), retry.OutcomeSuccess, &retry.Result{}
	finR := fin
	finR.StartedAt = run.At
	finTR := finR
	finTR.TriggeredAt = trig.At
	pol := func() retry.Policy { return retry.Policy{MaxAttempts: 1} }
	for _, split := range [][]protocol.Report{{trig, run, fin}, {trig, finR}, {runT, fin}, {finTR}} {
		cur := &Record{Execution: protocol.Execution{ExecID: exec, JobID: job, Attempt: 1, State: protocol.StatePending, Agent: "a1"}}
		var made []string
		for _, r := range split {
			next, effs, err := Apply(cur, Report{Report: r}, Env{Now: now, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, groups(t, effs))
			cur = next
		}
		for i, r := range split {
			_, effs, err := Apply(cur, Report{Report: r}, Env{Now: now, Policy: pol})
			if sentinel(err) != ErrDuplicate {
				t.Fatalf("%d reports, report %d again: %v", len(split), i, err)
			}
			if got := groups(t, effs); got != made[i] {
				t.Errorf("%d reports, report %d again replays %s, it made %s", len(split), i, got, made[i])
			}
		}
		if n := len(cur.Applied); n != 3 || cur.Ends&0b100 == 0 || !slices.Equal(cur.Path, []protocol.State{"TRIGGERED", "RUNNING", "SUCCESS"}) {
			t.Errorf("%d reports: record %v %v ends %03b", len(split), cur.Applied, cur.Path, cur.Ends)
		}
	}
}

// groups renders the transitions of effs as from>via>to, one group per
// Apply (stored transitions) or per End (replayed ones).
func groups(t *testing.T, effs []Effect) string {
	t.Helper()
	var ts []Transition
	for _, e := range effs {
		switch e := e.(type) {
		case Transitioned:
			ts = append(ts, e.T)
		case ReplayEvent:
			ts = append(ts, e.T)
		}
	}
	if len(ts) == 0 {
		return ""
	}
	out := fmt.Sprint(ts[0].From)
	for _, tr := range ts {
		out += ">" + string(tr.To)
	}
	return out
}

// TestReplaysMatchDuplicate: Replays of the effects of an applied report
// are the events a duplicate of that report re-publishes (same
// transitions, grouped into one event the same way, the event's reason
// its last transition's), and leave out the
// effects that are not events (the retry timer).
func TestReplaysMatchDuplicate(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	job := "ax-ctl-20261207080000-abcdef"
	exec := protocol.ExecID(job, now)
	for _, tc := range []struct {
		name    string
		outcome retry.Outcome
	}{{"success", retry.OutcomeSuccess}, {"retryable failure", retry.OutcomeFailure}} {
		t.Run(tc.name, func(t *testing.T) {
			r := protocol.Report{V: 1, Agent: "a1", JobID: job, ExecID: exec, Attempt: 1, Kind: protocol.ReportFinished, ScheduledAt: now,
				At: now.Add(5 * time.Millisecond), TriggeredAt: now.Add(time.Millisecond), StartedAt: now.Add(2 * time.Millisecond),
				Outcome: tc.outcome, Result: &retry.Result{Retryable: true}}
			env := Env{Now: now.Add(6 * time.Millisecond), Policy: func() retry.Policy {
				return retry.Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
			}}
			rec, effs, err := Apply(nil, Report{Report: r}, env)
			if err != nil {
				t.Fatal(err)
			}
			if timer := slices.ContainsFunc(effs, func(e Effect) bool { _, ok := e.(ScheduleRetry); return ok }); timer != (tc.outcome != retry.OutcomeSuccess) {
				t.Fatalf("the applied report's effects hold a retry timer: %v; the test needs one for a retryable failure only", timer)
			}
			_, dup, err := Apply(rec, Report{Report: r}, env)
			if !errors.Is(err, ErrDuplicate) {
				t.Fatalf("applied again: %v, want a duplicate", err)
			}
			got := Replays(effs)
			if len(got) != 3 {
				t.Fatalf("Replays gave %d effects, want the 3 steps' events: %#v", len(got), got)
			}
			if len(dup) != len(got) {
				t.Fatalf("the duplicate replays %d effects, Replays %d", len(dup), len(got))
			}
			for i := range got {
				g, d := got[i].(ReplayEvent), dup[i].(ReplayEvent)
				// An event takes the reason of its last transition.
				if g.T.From != d.T.From || g.T.To != d.T.To || g.End != d.End || g.End && g.T.Reason != d.T.Reason {
					t.Errorf("effect %d: Replays %+v end %v, duplicate %+v end %v", i, g.T, g.End, d.T, d.End)
				}
			}
		})
	}
}
