package controller

import (
	"context"
	"math/rand/v2"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// lostLease is a group lease granted again after an earlier grant: it
// lapsed and moved (or went back to the same agent), was handed back, or
// expired from ax_leases while no controller ran.
type lostLease struct {
	job      string
	oldAgent string // the previous holder ("" when not known)
	newAgent string
	epoch    uint64 // the new epoch
}

// settleEpochs moves on the executions of the leases' jobs still open
// under an earlier epoch, so that none waits for an agent whose lease
// ended (every path that grants a lease ends here, manageGroupLeases):
//
//   - TRIGGERED or RUNNING on another agent than the new holder: that
//     agent lost its lease, and with it the attempt: it ends with outcome
//     agent_lost, RETRY_WAITING on the new holder, or FAILED when the job's
//     attempts are spent (retry.Policy.Decide). On the new holder itself
//     (the lease came back to the same agent) it is left alone: the agent
//     still runs it and reports it finished, or fenced if it drops it.
//   - RETRY_WAITING whose retry was sent under the earlier epoch (Sent):
//     the agent never runs it now (it fences runs of an epoch its job has
//     moved past), so that attempt counts as lost and the new holder runs
//     the next one — never the same attempt twice;
//   - RETRY_WAITING not sent yet: pointed at the new holder and epoch.
//
// A RETRY_WAITING result has its retry timer armed (due ones fire at
// once); fireRetry sends it to whoever holds the lease at that time. Only
// executions fired under a lease (epoch > 0) move; a one-shot run of a
// group job is placed once and not moved.
func (c *Controller) settleEpochs(ctx context.Context, lost []lostLease) {
	byJob := map[string]lostLease{}
	for _, l := range lost {
		byJob[l.job] = l
	}
	var ids []string
	err := c.scanExecs(ctx, func(r *execRecord, _ uint64) {
		if l, ok := byJob[r.JobID]; ok && r.Epoch > 0 && r.Epoch < l.epoch && !r.State.Terminal() {
			ids = append(ids, r.ExecID)
		}
	})
	if err != nil {
		c.log.Error("settle earlier epochs: scan executions", "err", err)
		return
	}
	for _, id := range ids {
		var tr *transition
		before, after, err := c.mutateExec(ctx, id, func(cur *execRecord) (*execRecord, error) {
			tr = nil
			if cur == nil {
				return nil, nil
			}
			l, ok := byJob[cur.JobID]
			if !ok || cur.Epoch == 0 || cur.Epoch >= l.epoch || cur.State.Terminal() {
				return nil, nil
			}
			return c.settleOne(cur, l, &tr)
		})
		if err != nil {
			c.log.Warn("settle earlier epochs: move execution", "exec", id, "err", err)
			continue
		}
		if after == nil {
			continue
		}
		if tr != nil {
			c.afterTransition(after, *tr)
		}
		if after.State == protocol.StateRetryWaiting {
			c.retries.schedule(after.ExecID, after.JobID, after.Attempt, after.NextAttemptAt)
		}
		c.log.Warn("execution of an earlier lease epoch moved on", "exec", id, "job", after.JobID, "from_agent", before.Agent,
			"from_epoch", before.Epoch, "to_agent", after.Agent, "state", after.State, "attempt", after.Attempt, "epoch", after.Epoch)
	}
}

// settleOne decides one execution of settleEpochs (see there); tr is set
// when its state changes. nil: left as it is.
func (c *Controller) settleOne(cur *execRecord, l lostLease, tr **transition) (*execRecord, error) {
	now := c.now()
	lostAttempt := cur.Attempt
	switch {
	case cur.State == protocol.StateTriggered || cur.State == protocol.StateRunning:
		if cur.Agent == l.newAgent {
			return nil, nil
		}
	case cur.State == protocol.StateRetryWaiting && cur.Sent == cur.Attempt+1:
		lostAttempt = cur.Attempt + 1
	case cur.State == protocol.StateRetryWaiting:
		lostAttempt = 0 // not sent yet: only re-pointed
	default:
		return nil, nil
	}
	if lostAttempt > 0 {
		pol := retry.DefaultPolicy()
		if j, _, ok := c.jobs.get(cur.JobID); ok {
			pol = j.Retry.Policy().WithDefaults()
		}
		d := pol.Decide(lostAttempt, retry.OutcomeAgentLost, retry.Result{Retryable: true}, rand.Int64N)
		to := protocol.StateFailed
		if d.Retry {
			to = protocol.StateRetryWaiting
			cur.NextAttemptAt = now.Add(d.Delay)
		}
		if to != cur.State {
			if err := CheckTransition(cur.State, to); err != nil {
				return nil, err
			}
			*tr = &transition{from: cur.State, to: to, reason: d.Reason}
		}
		cur.State, cur.Attempt, cur.Reason, cur.Outcome, cur.Suspect = to, lostAttempt, d.Reason, retry.OutcomeAgentLost, d.Suspect
		cur.FinishedAt = now
		cur.Result = &retry.Result{Message: "agent " + cur.Agent + " lost: its lease of the job ended", Retryable: true}
		cur.Applied, cur.Path = nil, nil
	}
	cur.Agent, cur.Epoch, cur.UpdatedAt = l.newAgent, l.epoch, now
	return cur, nil
}
