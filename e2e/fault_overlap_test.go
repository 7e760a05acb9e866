package e2e

import (
	"sort"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// The checks of TestFaultInjection that compare runs with each other:
// concurrency, overlap forbid and group-lease epochs.

// activeUntil is when a run stopped counting on its agent: its end, cut
// where its agent was SIGKILLed (the restarted agent cannot know of an
// exec script left running).
func (c *recon) activeUntil(run faultRun) time.Time {
	end := run.end
	if end.IsZero() {
		end = time.Unix(1<<40, 0) // none: for ever
	}
	if k := c.cutAt(run); !k.IsZero() && k.Before(end) {
		end = k
	}
	return end
}

// byJobAgent groups the runs with a known agent that keep (job, agent).
func (c *recon) byJobAgent(keep func(faultJob, faultRun) bool) map[[2]string][]faultRun {
	by := map[[2]string][]faultRun{}
	for _, run := range c.runs {
		j, _, ok := c.jobOf(run.execID)
		if !ok || run.agent == "unknown" || !keep(j, run) {
			continue
		}
		k := [2]string{j.ID, run.agent}
		by[k] = append(by[k], run)
	}
	for _, rs := range by {
		sort.Slice(rs, func(a, b int) bool { return rs[a].start.Before(rs[b].start) })
	}
	return by
}

// checkOverlap: every job has concurrency 1, so two runs of one job never
// overlap on one agent process (two first attempts of a periodic job are
// left to checkForbid).
func (c *recon) checkOverlap() {
	for k, rs := range c.byJobAgent(func(faultJob, faultRun) bool { return true }) {
		j := c.jobs[k[0]]
		fires := j.Schedule.Every != "" || j.Schedule.Cron != ""
		var last faultRun
		lastEnd := time.Time{}
		for _, run := range rs {
			bothFires := fires && run.attempt == 1 && last.attempt == 1 // checkForbid's
			if run.start.Before(lastEnd) && run.key() != last.key() && !bothFires {
				c.r.add(vOverlap, "two runs of a job at once on one agent (concurrency 1) / "+jobClass(j),
					"on %s: %s started while %s ran", k[1], run, last)
			}
			if end := c.activeUntil(run); end.After(lastEnd) {
				last, lastEnd = run, end
			}
		}
	}
}

// checkForbid: a fire of a periodic job (overlap forbid, concurrency 1)
// made while an earlier fire of it is still active on that agent is
// recorded SKIPPED and never runs; so of two fires that both ran, the
// later-triggered one was not triggered while the other was active.
// Active means triggered and not finished, waiting in the ready queue or
// in SQLite included (agent/scheduler/jobs.go, jobRef.active; overlap forbid's "while the
// last still runs" read that way), across a restart too (a queued fire
// still counts at the start). Trigger times are the agent's own, from its
// store; where one is missing, the run's start stands for it (a later
// time: it only misses cases).
func (c *recon) checkForbid() {
	from := func(run faultRun) time.Time {
		if t, ok := c.triggers[run.agent][run.key()]; ok && t.Before(run.start) {
			return t
		}
		return run.start
	}
	periodicForbid := func(j faultJob, run faultRun) bool {
		return run.attempt == 1 && (j.Schedule.Every != "" || j.Schedule.Cron != "") &&
			(j.Overlap == "" || j.Overlap == protocol.OverlapForbid) && j.Concurrency <= 1
	}
	for k, rs := range c.byJobAgent(periodicForbid) {
		j := c.jobs[k[0]]
		// Each fire active at once with an earlier-triggered one counts
		// once: it is the one that should have been SKIPPED.
		for _, y := range rs {
			for _, x := range rs {
				if x.execID == y.execID {
					continue
				}
				fx, fy := from(x), from(y)
				if fx.After(fy) || fx.Equal(fy) && !x.start.Before(y.start) {
					continue // y is the earlier one of the pair
				}
				if fy.Before(c.activeUntil(x)) {
					c.r.add(vOverlap, "fire run while an earlier fire was active (overlap forbid) / "+jobClass(j),
						"on %s: %s (triggered %s) while %s (triggered %s) was active until %s",
						k[1], y, fmtTime(fy), x, fmtTime(fx), fmtTime(c.activeUntil(x)))
					break
				}
			}
		}
	}
}

// checkEpochs: every run of a group job of mode any carries the epoch of
// the lease it fired under, and no epoch of a job fired on two agents.
func (c *recon) checkEpochs() {
	holder := map[[2]any]faultRun{}
	for _, run := range c.runs {
		j, _, ok := c.jobOf(run.execID)
		if !ok || j.Target.Group == "" || j.Target.Mode == protocol.ModeAll || (j.Schedule.Every == "" && j.Schedule.Cron == "") {
			continue
		}
		if run.epoch == 0 {
			c.r.add(vFencing, "group run without an epoch / "+jobClass(j), "%s", run)
			continue
		}
		k := [2]any{j.ID, run.epoch}
		if h, ok := holder[k]; ok && h.agent != run.agent {
			c.r.add(vFencing, "one epoch fired on two agents / "+jobClass(j), "epoch %d: %s and %s", run.epoch, h, run)
		}
		holder[k] = run
	}
}
