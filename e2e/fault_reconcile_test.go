package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Reconciliation of TestFaultInjection: the handlers' own run log against
// the controller's records (GET /v1/executions) and events (AX_EVT), once
// the cluster is quiet. The invariants are stated on TestFaultInjection.

// faultData is what the reconciliation reads.
type faultData struct {
	jobs     map[string]faultJob // every job by id
	oneShots []faultJob
	runs     []faultRun
	execs    []protocol.Execution
	events   []protocol.Event
	kills    map[string][]time.Time // agent → when it was SIGKILLed
	stalls   map[string][]time.Time // controller node → when a fault of it began
	// triggers are the agents' own trigger times: agent → exec/attempt →
	// triggered_at (faultCluster.triggerTimes).
	triggers map[string]map[string]time.Time
}

// recon is faultData indexed for the checks.
type recon struct {
	faultData
	r         *faultReport
	byExec    map[string]protocol.Execution
	runsOf    map[string][]faultRun       // exec/attempt → runs
	retryWait map[string]protocol.Event   // exec/attempt → its (last) RETRY_WAITING event
	path      map[string][]protocol.Event // exec → its events
	// latePending are the executions whose PENDING event was stored late
	// and excused (checkHistoryOrder).
	latePending []string
}

// reconcile checks every invariant over d.
func reconcile(d faultData) *faultReport {
	c := &recon{faultData: d, r: newFaultReport(), byExec: map[string]protocol.Execution{}, runsOf: map[string][]faultRun{},
		retryWait: map[string]protocol.Event{}, path: map[string][]protocol.Event{}}
	for _, e := range d.execs {
		c.byExec[e.ExecID] = e
	}
	for _, run := range d.runs {
		c.runsOf[run.key()] = append(c.runsOf[run.key()], run)
	}
	for _, ev := range d.events {
		c.path[ev.ExecID] = append(c.path[ev.ExecID], ev)
		if ev.To == protocol.StateRetryWaiting {
			c.retryWait[fmt.Sprintf("%s/%d", ev.ExecID, ev.Attempt)] = ev
		}
	}
	c.checkLost()
	c.checkDuplicates()
	c.checkStuck()
	c.checkEarly()
	c.checkRecords()
	c.checkOverlap()
	c.checkForbid()
	c.checkEpochs()
	c.checkHistoryOrder()
	c.r.stats = append(faultStats(d, c.orphaned), offsetErrors(d.execs, d.triggers))
	if len(c.latePending) > 0 {
		c.r.stats = append(c.r.stats, fmt.Sprintf("history: %d PENDING events stored late, each of a create its controller stalled just after (excused): %s",
			len(c.latePending), strings.Join(c.latePending, ", ")))
	}
	return c.r
}

// jobOf is the job of an execution and the scheduled time in its id.
func (c *recon) jobOf(execID string) (faultJob, time.Time, bool) {
	jobID, at, err := protocol.ParseExecID("exec_id", execID)
	if err != nil {
		return faultJob{}, time.Time{}, false
	}
	j, ok := c.jobs[jobID]
	return j, at, ok
}

// cutAt is when the run's agent was SIGKILLed after the run started (zero:
// never): the end of the agent process the run belongs to.
func (c *recon) cutAt(run faultRun) time.Time {
	for _, k := range c.kills[run.agent] {
		if !k.Before(run.start) {
			return k
		}
	}
	return time.Time{}
}

// orphaned: the run's agent was SIGKILLed while it ran (an exec script
// goes on alone; a Go handler dies with the agent).
func (c *recon) orphaned(run faultRun) bool {
	k := c.cutAt(run)
	return !k.IsZero() && (run.end.IsZero() || run.end.After(k))
}

// events is the event path of an execution, for messages.
func (c *recon) events(execID string) string {
	var s []string
	for _, ev := range c.path[execID] {
		s = append(s, fmt.Sprintf("%s #%d %s %s(%s)", ev.At.Format("15:04:05.000"), ev.Attempt, ev.Agent, ev.To, ev.Reason))
	}
	return strings.Join(s, ", ")
}

// checkLost: every run has a record at its attempt or later; every
// one-shot job has an execution.
func (c *recon) checkLost() {
	for _, run := range c.runs {
		j, _, ok := c.jobOf(run.execID)
		if !ok {
			c.r.add(vLost, "run of a job the test did not create", "%s", run)
			continue
		}
		e, ok := c.byExec[run.execID]
		switch {
		case !ok:
			c.r.add(vLost, "run without an execution record / "+jobClass(j), "%s", run)
		case e.Attempt < run.attempt:
			c.r.add(vLost, "record at a lower attempt than the run / "+jobClass(j), "%s; record at attempt %d %s (%s); events: %s",
				run, e.Attempt, e.State, e.Reason, c.events(e.ExecID))
		}
	}
	has := map[string]bool{}
	for _, e := range c.execs {
		has[e.JobID] = true
	}
	for _, j := range c.oneShots {
		if !has[j.ID] {
			c.r.add(vLost, "one-shot job without an execution / "+jobClass(j), "job %s (%s) created %s", j.ID, j.Name, fmtTime(j.CreatedAt))
		}
	}
}

// checkDuplicates: no (exec id, attempt) runs twice.
func (c *recon) checkDuplicates() {
	for _, k := range slices.Sorted(maps.Keys(c.runsOf)) {
		rs := c.runsOf[k]
		if len(rs) < 2 {
			continue
		}
		j, _, _ := c.jobOf(rs[0].execID)
		var s []string
		for _, run := range rs {
			s = append(s, fmt.Sprintf("%s@%s", run.agent, fmtTime(run.start)))
		}
		c.r.add(vDuplicate, "attempt run twice / "+jobClass(j), "%s ran %d times: %s; events: %s", k, len(rs), strings.Join(s, ", "), c.events(rs[0].execID))
	}
}

// checkStuck: every execution is terminal once the cluster is quiet.
func (c *recon) checkStuck() {
	for _, e := range c.execs {
		if e.State.Terminal() {
			continue
		}
		j, _, _ := c.jobOf(e.ExecID)
		c.r.add(vStuck, fmt.Sprintf("%s (%s) / %s", e.State, e.Reason, jobClass(j)), "%s at attempt %d on %q, next attempt at %s; events: %s",
			e.ExecID, e.Attempt, e.Agent, fmtTime(e.NextAttemptAt), c.events(e.ExecID))
	}
}

// checkEarly: no run before its scheduled time; no attempt n>1 before the
// next_attempt_at of attempt n-1's RETRY_WAITING event, whose backoff is
// at least the policy's; without that event, not before the failed
// run's end plus the backoff.
func (c *recon) checkEarly() {
	for _, run := range c.runs {
		j, sched, ok := c.jobOf(run.execID)
		if !ok {
			continue
		}
		if e, ok := c.byExec[run.execID]; ok && !e.ScheduledAt.IsZero() {
			sched = e.ScheduledAt
		}
		if run.start.Before(sched) {
			c.r.add(vEarly, "before its scheduled time / "+jobClass(j), "%s: %s early", run, sched.Sub(run.start))
		}
		if run.attempt < 2 {
			continue
		}
		want := j.policy().Delay(run.attempt-1, nil)
		prevKey := fmt.Sprintf("%s/%d", run.execID, run.attempt-1)
		if ev, ok := c.retryWait[prevKey]; ok {
			if at := ev.NextAttemptAt.Truncate(time.Millisecond); run.start.Before(at) {
				c.r.add(vEarly, "before its retry time / "+jobClass(j), "%s: %s before next_attempt_at %s", run, at.Sub(run.start), fmtTime(at))
			}
			if got := ev.NextAttemptAt.Sub(ev.At); got < want-time.Millisecond {
				c.r.add(vEarly, fmt.Sprintf("backoff shorter than the policy after %s / %s", ev.Reason, jobClass(j)),
					"%s attempt %d: backoff %s, policy %s", run.execID, run.attempt-1, got, want)
			}
			continue
		}
		if prev := c.runsOf[prevKey]; len(prev) == 1 && !prev[0].end.IsZero() && prev[0].exit != 0 && !c.orphaned(prev[0]) {
			if at := prev[0].end.Add(want); run.start.Before(at) {
				c.r.add(vEarly, "before the backoff after the failed run / "+jobClass(j), "%s: %s after attempt %d failed, backoff %s",
					run, run.start.Sub(prev[0].end), run.attempt-1, want)
			}
		}
	}
}

// checkRecords: the record's final word on its attempt agrees with the
// run of that attempt (see TestFaultInjection, "misrecorded").
func (c *recon) checkRecords() {
	for _, e := range c.execs {
		j, _, ok := c.jobOf(e.ExecID)
		rs := c.runsOf[fmt.Sprintf("%s/%d", e.ExecID, e.Attempt)]
		if !ok || len(rs) > 1 || !e.State.Terminal() {
			continue
		}
		var run *faultRun
		if len(rs) == 1 {
			run = &rs[0]
		}
		ended := run != nil && !run.end.IsZero()
		unknown := e.Outcome == retry.OutcomeAgentLost || e.Outcome == retry.OutcomeInterrupted
		add := func(class, format string, args ...any) {
			c.r.add(vMisrecorded, class+" / "+jobClass(j), "%s at attempt %d (%s, %q): "+format,
				append([]any{e.ExecID, e.Attempt, e.Outcome, e.Reason}, args...)...)
		}
		switch e.State {
		case protocol.StateSuccess:
			switch {
			case run == nil:
				add("SUCCESS of an attempt that never ran", "events: %s", c.events(e.ExecID))
			case !ended:
				add("SUCCESS of a run that never finished", "%s", run)
			case run.exit != 0:
				add("SUCCESS of a failed run", "%s", run)
			}
		case protocol.StateFailed:
			switch {
			case unknown || !ended:
			case run.exit == 0:
				add("FAILED, but the handler succeeded", "%s", run)
			case e.Attempt < j.policy().MaxAttempts:
				add("FAILED with retryable attempts left", "%s; max_attempts %d", run, j.policy().MaxAttempts)
			}
		case protocol.StateSkipped:
			if run != nil {
				add("SKIPPED, but it ran", "%s", run)
			}
		case protocol.StateCancelled:
			add("CANCELLED, and the test cancels nothing", "events: %s", c.events(e.ExecID))
		}
		if run != nil && !unknown && run.agent != "unknown" && e.Agent != "" && e.Agent != run.agent {
			add("recorded on another agent than the one that ran it", "record %s, %s", e.Agent, run)
		}
	}
}

// pendingStall is how soon after a create a fault of its controller
// excuses its PENDING event stored late: the hold (up to 1 s) and some.
const pendingStall = 2 * time.Second

// stalledAfterCreate reports whether the controller that created ev's
// execution (named in its exec id) had a fault begin from 500 ms before
// the create's time to pendingStall after it.
func (c *recon) stalledAfterCreate(ev protocol.Event) bool {
	for node, ts := range c.stalls {
		if !strings.HasPrefix(ev.ExecID, "ax-"+node+"-") {
			continue
		}
		for _, t := range ts {
			if !t.Before(ev.At.Add(-500*time.Millisecond)) && !t.After(ev.At.Add(pendingStall)) {
				return true
			}
		}
	}
	return false
}

// stepRank orders the states an attempt passes through: PENDING (a
// create's, before the first attempt's other steps), triggered, then
// running, then its end (a terminal state, or RETRY_WAITING).
func stepRank(s protocol.State) int {
	switch s {
	case protocol.StatePending:
		return 0
	case protocol.StateTriggered:
		return 1
	case protocol.StateRunning:
		return 2
	}
	return 3
}

// checkHistoryOrder: the events of an execution in AX_EVT, in stream
// order, never go back: each is at the attempt of the one before it or a
// later one, and within an attempt at its step or a later one (PENDING,
// TRIGGERED, RUNNING, its end). A create's PENDING event, held up to a
// second (controller/eventhold.go), counts too: a replica handing a shard
// over publishes its held events first, and one that may have lost it
// reads the record before. One excuse: the controller that made the
// create was stopped, frozen, cut off or killed within pendingStall of it
// (stalledAfterCreate): a publish it made just before, or while its lease
// still looked fresh, can reach the server after the stall, behind the
// events of the replica that took the shard.
func (c *recon) checkHistoryOrder() {
	for _, id := range slices.Sorted(maps.Keys(c.path)) {
		var last protocol.Event
		for _, ev := range c.path[id] {
			if last.To != "" && (ev.Attempt < last.Attempt || ev.Attempt == last.Attempt && stepRank(ev.To) < stepRank(last.To)) {
				if ev.To == protocol.StatePending && c.stalledAfterCreate(ev) {
					c.latePending = append(c.latePending, id)
					continue
				}
				j, _, _ := c.jobOf(id)
				c.r.add(vHistory, fmt.Sprintf("%s stored after %s / %s", ev.To, last.To, jobClass(j)),
					"%s: attempt %d %s after attempt %d %s; events: %s", id, ev.Attempt, ev.To, last.Attempt, last.To, c.events(id))
				break
			}
			last = ev
		}
	}
}
