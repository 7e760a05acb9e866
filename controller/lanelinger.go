package controller

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// reportLinger is how long a lane holds the reports of an execution that
// only say it was triggered or is running, unacknowledged, waiting for its
// later reports: a fast attempt whose triggered, running and finished
// reports come apart (the agent's outbox published them in different
// windows) is then written once, not once per report. The state a report
// holds back is seen up to this much later; the report stays in AX_RPT
// until it is applied, so a crash loses nothing (it is redelivered).
const reportLinger = 25 * time.Millisecond

// lingerMsg is a report message of a lane and when it stops waiting for
// the later reports of its execution.
type lingerMsg struct {
	msg   jetstream.Msg
	until time.Time
}

// take returns the messages of the next batch: those held back, in the
// order they came, then msgs, which wait until now+reportLinger.
func (l *lane) take(msgs []jetstream.Msg, now time.Time) []lingerMsg {
	in := append(l.inBatch[:0], l.lingering...)
	l.lingering = l.lingering[:0]
	for _, m := range msgs {
		in = append(in, lingerMsg{msg: m, until: now.Add(reportLinger)})
	}
	l.inBatch = in
	return in
}

// holdBack removes from the batch the groups of executions whose reports
// all only move them forward to TRIGGERED or RUNNING and may still wait
// (until after now), and keeps their messages for the next batch. With
// flush (the lane is closing) nothing is held back.
func (l *lane) holdBack(now time.Time, flush bool) {
	if flush || reportLinger <= 0 {
		return
	}
	kept := l.groups[:0]
	for _, g := range l.groups {
		if !mayLinger(g, now) {
			kept = append(kept, g)
			continue
		}
		for _, p := range g.items {
			l.lingering = append(l.lingering, lingerMsg{msg: p.msg, until: p.until})
		}
		delete(l.index, g.id)
	}
	l.groups = kept
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

// lingerDue is when the first held-back message stops waiting (ok false
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
