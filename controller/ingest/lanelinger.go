package ingest

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// reportLinger is how long a lane holds the reports of an execution of a
// one-shot job that only say it was triggered or is running,
// unacknowledged, waiting for its later reports: a fast attempt whose
// triggered, running and finished reports come apart (the agent's outbox
// published them in different windows, or its queue held the run) is
// then written once, not once per report. The state a report
// holds back is seen up to this much later; the report stays in AX_RPT
// until it is applied, so a crash loses nothing (it is redelivered).
const reportLinger = 100 * time.Millisecond

// addTo adds p to the group of its execution in the current batch.
func (l *lane) addTo(p *pendingReport) {
	g := l.index[p.r.ExecID]
	if g == nil {
		g = &group{id: p.r.ExecID}
		l.index[p.r.ExecID] = g
		l.groups = append(l.groups, g)
	}
	g.items = append(g.items, p)
}

// holdBack removes from the batch the groups of executions of one-shot
// jobs whose reports all only move them forward to TRIGGERED or RUNNING
// and may still wait (until after now), and keeps them, decoded and
// checked, for the next batch. With flush (the lane is closing) nothing is held back.
func (l *lane) holdBack(now time.Time, flush bool) {
	if flush || reportLinger <= 0 {
		return
	}
	kept := l.groups[:0]
	for _, g := range l.groups {
		if !mayLinger(g, now) || !l.oneShot(g) {
			kept = append(kept, g)
			continue
		}
		l.lingering = append(l.lingering, g.items...)
		delete(l.index, g.id)
	}
	l.groups = kept
}

// oneShot reports whether g's execution is of a one-shot job (asap, at,
// delay): its record exists from its creation (PENDING), so holding back
// its triggered and running reports delays only their states. The first
// reports of a periodic fire make its record; they are never held back.
func (l *lane) oneShot(g *group) bool {
	b, ok := l.w.c.jobs.Brief(g.items[0].r.JobID)
	return ok && !b.Periodic
}

// mayLinger reports whether every report of g is a triggered or running
// report whose wait has not ended.
func mayLinger(g *group, now time.Time) bool {
	for _, p := range g.items {
		if p.r.Kind != protocol.ReportTriggered && p.r.Kind != protocol.ReportRunning || !now.Before(p.until) {
			return false
		}
	}
	return len(g.items) > 0
}

// lingerDue is when the first held-back report stops waiting (ok false
// when none waits).
func (l *lane) lingerDue() (time.Time, bool) {
	if len(l.lingering) == 0 {
		return time.Time{}, false
	}
	due := l.lingering[0].until
	for _, m := range l.lingering[1:] {
		if m.until.Before(due) {
			due = m.until
		}
	}
	return due, true
}
