package ingest

import (
	"context"
	"time"

	"github.com/axsched/ax/controller/execution"
)

// storeEvents publishes the effects of the batch's applied reports (their
// events and retry timers) and waits until the events are stored, in
// rounds: a round starts the effects of each group's next report, up to
// and including one with events in flight, and waits for them. So a
// report's events are published only once those of the reports before it
// in its execution are stored, and AX_EVT keeps them in order even when it
// refuses one and takes the next (TestEventsOfOneWriteInOrder); a batch
// whose executions have one report each is one round. An event that could
// not be stored (AX_EVT unreachable, full, the publish refused) is
// published again with the same Msg-Id (execution.Replays) after a
// growing wait (50 ms to 5 s), its group's messages kept in progress,
// until it is stored or ctx ends (false). Its record is written, so the
// event must be stored before the reports behind it apply: a report
// redelivered for its event instead came back after the lane had applied
// the reports behind it, and AX_EVT stored the events out of order
// (TestEventStoredBeforeLaterReports).
func (l *lane) storeEvents(ctx context.Context) bool {
	c := l.w.c
	backoff := 50 * time.Millisecond
	var inFlight, failed []*group
	for {
		inFlight = inFlight[:0]
		for _, g := range l.groups {
			if l.startNext(g) {
				inFlight = append(inFlight, g)
			}
		}
		if len(inFlight) == 0 {
			return true
		}
		for {
			failed = failed[:0]
			for _, g := range inFlight {
				ok, done := waitEvents(ctx, g.items[g.sent-1])
				if !done {
					return false
				}
				if !ok {
					failed = append(failed, g)
				}
			}
			if len(failed) == 0 {
				break
			}
			c.log.Warn("event of an applied report not stored, publishing it again", "execs", len(failed), "exec", failed[0].id, "in", backoff)
			if !holdOn(ctx, &backoff, failed...) {
				return false
			}
			for _, g := range failed {
				p := g.items[g.sent-1]
				p.evs, p.evErr = c.host.StartEffects(context.Background(), g.next, execution.Replays(p.effs))
			}
			inFlight = append(inFlight[:0], failed...)
		}
	}
}

// startNext starts the effects of the group's reports not started yet, in
// order, until one has events in flight (true); false when none is left.
func (l *lane) startNext(g *group) bool {
	for g.sent < len(g.items) {
		p := g.items[g.sent]
		g.sent++
		if !p.due {
			continue
		}
		p.evs, p.evErr = l.w.c.host.StartEffects(context.Background(), g.next, p.effs)
		if len(p.evs) > 0 || p.evErr {
			return true
		}
	}
	return false
}

// waitEvents waits for the report's events: ok when all are stored (its
// futures are then dropped), done false when ctx ended first.
func waitEvents(ctx context.Context, p *pendingReport) (ok, done bool) {
	ok = !p.evErr
	for _, f := range p.evs {
		select {
		case <-f.Ok():
		case <-f.Err():
			ok = false
		case <-ctx.Done():
			return false, false
		}
	}
	if ok {
		p.evs = nil
	}
	return ok, true
}

// holdOn keeps the groups' messages in progress and waits *backoff, then
// doubles it up to 5 s (settle, storeEvents); false when ctx ended first.
func holdOn(ctx context.Context, backoff *time.Duration, gs ...*group) bool {
	for _, g := range gs {
		for _, p := range g.items {
			_ = p.msg.InProgress()
		}
	}
	t := time.NewTimer(*backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*backoff = min(2**backoff, 5*time.Second)
	return true
}
