package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// An agent's store can lose its state (agent.db wiped, truncated or
// replaced): the agent then registers without a command cursor
// (Register.Fresh) or with one below the cursor it registered with before
// (the fleet tells, controller/fleet's storeLost). Reading AX_CMD from
// there would apply every command again, and run again runs that finished
// long ago. Instead the registration reply tells it to resume after the
// last command sent to it (RegisterReply.ResumeAfter, from lastCommandSeq),
// and the controller sends again what that skips and still matters
// (resendRuns):
//
//   - every assignment (the placement's ReconcileAgent with resend);
//   - the runs it still waits for on that agent: PENDING executions, and
//     RETRY_WAITING ones whose retry is due (sent already, or about to be).
//
// The resends of one agent run one at a time and at most once per
// storeLossResendEvery, later claims folded into the next (resendgate.go).
// Runs of executions the controller has recorded as finished are not sent
// again, so they do not run twice. Attempts the agent had TRIGGERED or
// RUNNING are lost with its store; they are logged. Group leases the agent
// held are not claimed by it any more and move after lease_ttl.

// lastCommandSeq returns the AX_CMD sequence of the last command sent to
// agent, 0 when there is none.
func (c *agentService) lastCommandSeq(ctx context.Context, agent string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return 0, fmt.Errorf("last command of %s: %w", agent, err)
	}
	return c.lastCommandIn(ctx, s, agent)
}

// lastCommandIn returns the sequence of the last command of agent in st
// (AX_CMD), 0 when there is none.
func (c *core) lastCommandIn(ctx context.Context, st jetstream.Stream, agent string) (uint64, error) {
	m, err := c.kvGuard.lastMsg(ctx, st, protocol.CommandSubject(agent))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last command of %s: %w", agent, err)
	}
	return m.Sequence, nil
}

// resendRuns sends agent again the runs the controller still waits for on
// it (see above); after is the sequence it resumes after, which makes the
// message ids of these re-sends differ from the originals' (the stream
// would drop them as duplicates).
func (c *agentService) resendRuns(ctx context.Context, agent string, after uint64) {
	now := c.now()
	c.ex.publishHeld(ctx, true) // the records creates hold (createheld.go) are in the scan
	var again []*execRecord
	var lost []string
	err := scanExecsOf(ctx, c.ex, func(r *execRecord) (*execRecord, bool) { return r, r.Agent == agent }, func(_ string, r *execRecord, _ uint64) {
		switch {
		case r.State == protocol.StatePending:
			again = append(again, r)
		case r.State == protocol.StateRetryWaiting && !r.NextAttemptAt.After(now):
			again = append(again, r)
		case r.State == protocol.StateTriggered || r.State == protocol.StateRunning:
			lost = append(lost, r.ExecID)
		}
	}, 0)
	if err != nil {
		c.log.Error("agent store lost its state: scan executions to send its runs again", "agent", agent, "err", err)
		return
	}
	sent := 0
	for _, r := range again {
		j, ok, err := c.jobsvc.knownJob(ctx, r.JobID)
		if err != nil {
			c.log.Error("agent store lost its state: read job to send its run again", "agent", agent, "exec", r.ExecID, "err", err)
			continue
		}
		if !ok {
			continue
		}
		attempt, runAt := r.Attempt, r.ScheduledAt
		if r.State == protocol.StateRetryWaiting {
			attempt, runAt = r.Attempt+1, r.NextAttemptAt
		}
		cmd := protocol.Command{Kind: protocol.CmdRun, Agent: agent, Run: &protocol.Run{
			Job: j, ExecID: r.ExecID, Attempt: attempt, RunAt: runAt, Epoch: r.Epoch,
		}}
		msgID := protocol.RunAgainMsgID(r.ExecID, attempt, agent, after)
		if err := c.ex.publishCommand(ctx, cmd, msgID); err != nil {
			c.log.Error("agent store lost its state: send run again", "agent", agent, "exec", r.ExecID, "err", err)
			continue
		}
		sent++
	}
	attrs := []any{"agent", agent, "resume_after", after, "runs_sent_again", sent}
	if len(lost) > 0 {
		attrs = append(attrs, "attempts_lost", len(lost), "lost_execs", lost[:min(len(lost), 10)])
	}
	c.log.Warn("agent store lost its state: pending runs sent again", attrs...)
}
