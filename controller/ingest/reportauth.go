package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// Reports are authorized against what the controller knows (docs/architecture.md: Security model),
// not only against the agent named by their subject (NATS permissions
// let an enrolled agent publish on ax.rpt.*.<itself> and nothing else):
//
//   - the shard token of the subject is the shard the job hashes to (on
//     the configured shard count, or on protocol.DefaultShards: what an
//     agent uses before its first registration), else bad_shard;
//   - a report under a lease epoch comes from the agent that was granted
//     that epoch (the epoch history, controller/lease/epochs.go), else
//     not_assigned (old_epoch when the epoch is older than the history
//     kept);
//   - a report that would create an execution (a periodic fire the agent
//     made) names a job that exists and that the agent may fire: its
//     pinned agent, a member of a broadcast group, or, for a group job of
//     mode any, the holder of the report's epoch; for a one-shot job, only
//     attempt 1 of its one execution from its pinned agent, once due (the
//     record a create holds, controller/createheld.go, or one a crash cut
//     short: firstOfOneShot); else unknown_job or not_assigned;
//   - a report of an execution that has a record comes from the agent the
//     controller sent that attempt to (controller/execution, wrong_agent).
//
// A rejected report changes nothing; it is counted in
// ax_reports_rejected_total{reason} and logged.

// ShardOK reports whether subject's shard token (returned, -1 when it
// has none) is the shard of jobID.
func (c *Ingest) ShardOK(subject, jobID string) (int, bool) {
	tok, ok := protocol.ReportSubjectShard(subject)
	if !ok {
		return -1, false
	}
	return tok, tok == protocol.Shard(jobID, c.cfg.Shards) ||
		c.cfg.Shards != protocol.DefaultShards && tok == protocol.Shard(jobID, protocol.DefaultShards)
}

// epochSlack is how much later than the grant that ended its epoch an
// execution fired under the epoch may be scheduled: the agent's clock
// (within its clock.max_skew of the controller's, or adopting it) and the
// time the controller took to see the lease lapse.
const epochSlack = time.Minute

// AuthorizeEpoch checks that r.Agent held r.Epoch of r's job, and that r's
// execution was scheduled before that epoch ended (plus LeaseTTL and
// epochSlack): an agent fires only while its lease is valid.
// The reason of a refusal is a Reject* label ("" when authorized).
func (c *Ingest) AuthorizeEpoch(ctx context.Context, r protocol.Report) (reason, detail string) {
	agent, st, ended := c.groups.EpochHolder(ctx, r.JobID, r.Epoch)
	switch {
	case st == lease.EpochForgotten:
		return RejectOldEpoch, fmt.Sprintf("lease epoch %d of job %s is older than the %d grants kept", r.Epoch, r.JobID, lease.MaxEpochGrants)
	case st == lease.EpochNeverGranted:
		return RejectNotAssigned, fmt.Sprintf("lease epoch %d of job %s was never granted", r.Epoch, r.JobID)
	case agent != r.Agent:
		return RejectNotAssigned, fmt.Sprintf("lease epoch %d of job %s was granted to %s, not %s", r.Epoch, r.JobID, agent, r.Agent)
	}
	if !ended.IsZero() {
		if _, at, err := protocol.ParseExecID("exec_id", r.ExecID); err == nil && at.After(ended.Add(c.cfg.LeaseTTL+epochSlack)) {
			return RejectNotAssigned, fmt.Sprintf("execution scheduled at %s, after lease epoch %d of job %s ended (the next was granted at %s)",
				at.Format(time.RFC3339Nano), r.Epoch, r.JobID, ended.Format(time.RFC3339Nano))
		}
	}
	return "", ""
}

// AuthorizeCreate checks that r may create its execution's record: the
// job exists, is periodic, and r.Agent may fire it (r.Epoch was checked by
// AuthorizeEpoch before). The reason of a refusal is a Reject* label
// ("" when authorized); early: the job could not be read now; the
// report may be tried again later.
func (c *Ingest) AuthorizeCreate(ctx context.Context, r protocol.Report) (reason, detail string, early bool) {
	reason, detail, early, _ = c.authorizeCreate(ctx, r)
	return reason, detail, early
}

// authorizeCreate is AuthorizeCreate; st is set when the refusal proves
// that the agent holds an assignment it must not (stray.go).
func (c *Ingest) authorizeCreate(ctx context.Context, r protocol.Report) (reason, detail string, early bool, st *stray) {
	j, _, ok := c.jobs.Get(r.JobID)
	if dj, at, deleted := c.jobs.DeletedPeriodic(r.JobID); !ok && deleted {
		// Deleted: a fire the agent made before the deletion (in flight,
		// or while its link was down) really ran and is recorded; a later
		// one is refused. The agent's own clock slack is the lease TTL.
		if _, sched, err := protocol.ParseExecID("exec_id", r.ExecID); err != nil || sched.After(at.Add(c.cfg.LeaseTTL)) {
			return RejectUnknownJob, fmt.Sprintf("job %s was deleted at %s, before this fire", r.JobID, at.Format(time.RFC3339Nano)), false,
				&stray{gen: 0, why: "job deleted"}
		}
		j, ok = dj, true
	}
	if !ok {
		// Not in this replica's cache: created on another replica just now?
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		j, err = c.host.ReadJob(rctx, r.JobID)
		cancel()
		if errors.Is(err, ErrJobNotFound) {
			return RejectUnknownJob, fmt.Sprintf("job %s does not exist", r.JobID), false, &stray{gen: 0, why: "no such job"}
		}
		if err != nil {
			return RejectUnknownJob, fmt.Sprintf("job %s could not be read: %v", r.JobID, err), true, nil
		}
	}
	if !j.Periodic() {
		if firstOfOneShot(j, r, c.now(), c.cfg.LeaseTTL) {
			return "", "", false, nil
		}
		return RejectNotAssigned, fmt.Sprintf("job %s is one-shot: its executions are made by the controller", j.ID), false,
			&stray{gen: j.Generation, why: "job is one-shot"}
	}
	switch {
	case j.Target.Agent != "":
		if r.Agent != j.Target.Agent || r.Epoch != 0 {
			var st *stray
			if r.Agent != j.Target.Agent && r.Epoch == 0 { // another agent's fire, not a lease's
				st = &stray{gen: j.Generation, why: "job pinned to " + j.Target.Agent}
			}
			return RejectNotAssigned, fmt.Sprintf("job %s is pinned to agent %s", j.ID, j.Target.Agent), false, st
		}
	case j.Target.Mode == protocol.ModeAll:
		if r.Shard == nil || r.Epoch != 0 || !c.groups.IsMember(j, r.Agent) {
			return RejectNotAssigned, fmt.Sprintf("agent %s is not a member of job %s's group %q", r.Agent, j.ID, j.Target.Group), false, nil
		}
	default:
		if r.Epoch == 0 {
			return RejectNotAssigned, fmt.Sprintf("job %s fires under a group lease; the report has no epoch", j.ID), false, nil
		}
	}
	if r.SkippedCount > 0 {
		if max := maxFires(j, r.FirstScheduledAt, r.ScheduledAt); r.SkippedCount > max {
			return RejectInvalid, fmt.Sprintf("skipped_count %d: job %s's schedule has at most %d fires from %s to %s",
				r.SkippedCount, j.ID, max, r.FirstScheduledAt.Format(time.RFC3339Nano), r.ScheduledAt.Format(time.RFC3339Nano)), false, nil
		}
	}
	return "", "", false, nil
}

// firstOfOneShot reports whether report r may create the record of
// one-shot job j's execution: the job is pinned to r's agent and not
// paused, and r is of attempt 1 of its one execution (the exec id and
// scheduled time of its fire), not under a lease, the fire's time come
// (the agent's clock may be ahead by slack). Such a record is held by the
// create that sent the run (controller/createheld.go), or was cut short
// by a crash before the reload makes it; the report says what the record
// would. Any other report of a one-shot job without a record is refused:
// the controller makes those executions.
func firstOfOneShot(j protocol.Job, r protocol.Report, now time.Time, slack time.Duration) bool {
	if j.Target.Agent == "" || r.Agent != j.Target.Agent || j.Paused || r.Epoch != 0 || r.Attempt != 1 || r.Shard != nil {
		return false
	}
	s, err := schedule.Parse(j.Schedule, j.CreatedAt)
	if err != nil {
		return false
	}
	at, ok := s.Next(time.Time{})
	// An exec id names its fire to the millisecond, and ax-agent reports
	// the scheduled time its run's exec id names.
	return ok && r.ScheduledAt.UnixMilli() == at.UnixMilli() && r.ExecID == protocol.ExecID(j.ID, at) && !at.After(now.Add(slack))
}

// maxFires bounds how many fires periodic job j can have from first to
// last, both included: by its period for an every schedule, by the cron
// resolution (one second) otherwise. A coalesced skipped report claiming
// more is refused, so a device cannot inflate ax_executions_total.
func maxFires(j protocol.Job, first, last time.Time) int {
	step := schedule.MinCronEvery
	if s, err := schedule.Parse(j.Schedule, j.CreatedAt); err == nil {
		if p, ok := schedule.Period(s); ok && p > 0 {
			step = p
		}
	}
	return int(last.Sub(first)/step) + 1
}
