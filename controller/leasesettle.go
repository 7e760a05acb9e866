package controller

import (
	"context"
	"errors"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/lease"
)

// settleEpochs moves on the executions of the leases' jobs still open
// under an earlier epoch, so that none waits for an agent whose lease
// ended (every path that grants a lease ends here: lease.GroupLeases
// asks for it through lease.GroupLeaseHost); each is an
// execution.AgentLost event:
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
func (c *agentService) settleEpochs(ctx context.Context, lost []lease.Lost) {
	byJob := map[string]lease.Lost{}
	for _, l := range lost {
		byJob[l.Job] = l
	}
	type open struct{ id, job string }
	var ids []open
	err := scanExecsOf(ctx, c.ex, func(r *execRecord) (open, bool) {
		l, ok := byJob[r.JobID]
		return open{r.ExecID, r.JobID}, ok && r.Epoch > 0 && r.Epoch < l.Epoch && !r.State.Terminal()
	}, func(_ string, o open, _ uint64) { ids = append(ids, o) }, 0)
	if err != nil {
		c.log.Error("settle earlier epochs: scan executions", "err", err)
		return
	}
	for _, o := range ids {
		c.settleOne(ctx, o.id, o.job, byJob[o.job])
	}
}

// settleOne moves execution id of job, of an epoch before l's, on to l's
// new agent (execution.AgentLost).
func (c *agentService) settleOne(ctx context.Context, id, job string, l lease.Lost) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	env, err := c.ex.jobEnv(ctx, job)
	if err != nil {
		c.log.Warn("settle earlier epochs: read job", "exec", id, "job", job, "err", err)
		return
	}
	before, after, effs, err := c.ex.applyExec(ctx, id, execution.AgentLost{NewAgent: l.NewAgent, Epoch: l.Epoch}, env)
	if errors.Is(err, execution.ErrMovedOn) {
		return
	}
	if err != nil {
		c.log.Warn("settle earlier epochs: move execution", "exec", id, "err", err)
		return
	}
	if err := c.ex.execEffects(ctx, after, nil, effs); err != nil {
		c.log.Warn("settle earlier epochs: effects", "exec", id, "err", err)
	}
	c.log.Warn("execution of an earlier lease epoch moved on", "exec", id, "job", after.JobID, "from_agent", before.Agent,
		"from_epoch", before.Epoch, "to_agent", after.Agent, "state", after.State, "attempt", after.Attempt, "epoch", after.Epoch)
}
