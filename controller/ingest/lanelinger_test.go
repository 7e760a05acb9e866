package ingest

import (
	"testing"
	"time"

	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// The lane's hold-back alone, over a job cache: the tests of lanes
// applying reports of whole controllers are the controller package's
// (TestSuccessWritesTwoRevisions and others).

// TestHoldBackOnlyOneShotSteps: a lane holds back the triggered and running
// reports of a one-shot job's execution while their wait lasts, and
// nothing else: a finished report, a wait that is over, and the reports
// of a periodic fire (they make its record: the fire is seen at once).
func TestHoldBackOnlyOneShotSteps(t *testing.T) {
	now := time.Now()
	jobs := jobcache.New(func() time.Time { return now.UTC() })
	once := protocol.Job{ID: "asap-1", Name: "asap", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-1"}, CreatedAt: now.UTC(), Generation: 1}
	every := protocol.Job{ID: "every-1", Name: "every-1s", Handler: "noop", Schedule: schedule.Spec{Every: "1s"},
		Target: protocol.Target{Agent: "edge-1"}, CreatedAt: now.UTC(), Generation: 1}
	jobs.Put(once, 1)
	jobs.Put(every, 2)
	c := &Ingest{jobs: jobs}
	rep := func(j protocol.Job, exec string, k protocol.ReportKind, until time.Time) *pendingReport {
		return &pendingReport{until: until, r: protocol.Report{JobID: j.ID, ExecID: exec, Attempt: 1, Kind: k}}
	}
	later := now.Add(reportLinger)
	cases := []struct {
		name  string
		items []*pendingReport
		held  bool
	}{
		{"one-shot triggered and running", []*pendingReport{rep(once, "a", protocol.ReportTriggered, later), rep(once, "a", protocol.ReportRunning, later)}, true},
		{"one-shot running", []*pendingReport{rep(once, "b", protocol.ReportRunning, later)}, true},
		{"one-shot triggered then finished", []*pendingReport{rep(once, "c", protocol.ReportTriggered, later), rep(once, "c", protocol.ReportFinished, later)}, false},
		{"one-shot triggered, wait over", []*pendingReport{rep(once, "d", protocol.ReportTriggered, now)}, false},
		{"periodic fire triggered", []*pendingReport{rep(every, "e", protocol.ReportTriggered, later)}, false},
	}
	for _, tc := range cases {
		l := newLane(&shardWorker{c: c})
		l.addTo(tc.items[0])
		for _, p := range tc.items[1:] {
			l.addTo(p)
		}
		l.holdBack(now, false)
		if held := len(l.groups) == 0; held != tc.held || held && len(l.lingering) != len(tc.items) {
			t.Errorf("%s: held back %v (%d reports), want %v", tc.name, held, len(l.lingering), tc.held)
		}
		l = newLane(&shardWorker{c: c})
		for _, p := range tc.items {
			l.addTo(p)
		}
		if l.holdBack(now, true); len(l.groups) != 1 {
			t.Errorf("%s: held back while the lane closes", tc.name)
		}
	}
}
