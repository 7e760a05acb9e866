package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// transition is one change of an execution, for events, metrics and logs:
// from → to, passing through via when the change made several transitions
// at once (the steps of one report).
type transition struct {
	from, to protocol.State
	via      []protocol.State
	reason   string
}

// noteTransition counts and logs one stored transition of an execution
// (execution.Transitioned); its event is published by publishEvent, once
// for the transitions of one change (startEffects).
func (c *execService) noteTransition(rec *execRecord, tr transition) {
	c.m.executions.WithLabelValues(string(tr.to)).Add(float64(rec.Fires())) // a coalesced SKIPPED record counts its fires
	c.logTransition(rec, tr)
	switch tr.to {
	case protocol.StateRunning:
		c.m.scheduleLag.Observe(max(rec.Lag.D(), 0).Seconds())
	case protocol.StateSuccess, protocol.StateFailed, protocol.StateRetryWaiting:
		if !rec.FinishedAt.IsZero() {
			c.m.duration.Observe(max(rec.Duration.D(), 0).Seconds())
		}
	}
}

// publishEvent publishes the event of one change of an execution (tr, rec
// right after it) asynchronously, with a Msg-Id
// (evt/<exec_id>/<attempt>/<STATE>) so that a re-publish (a duplicate
// report after a crash) is de-duplicated by the stream. It returns the
// publish future, nil when the event could not be sent.
//
// The PENDING event of a create carries its id in EventIDHeader instead:
// only a create makes a PENDING record (execution.Create), and its event
// has no second publisher — a repeated create returns the job already
// made, and historyrepair.go restores only an event the history index
// lacks once the index holds every stored event. A Msg-Id would only
// hold a de-duplication entry in the server's memory for the window
// (about 240 bytes) and be read back at each start within it: 300,000
// delayed one-shots created in a minute held 300,000 of them
// (bench/JOURNAL.md, stop 52).
func (c *execService) publishEvent(rec *execRecord, tr transition) jetstream.PubAckFuture {
	if !holdsPending(tr) {
		c.evHold.supersede(rec.ExecID) // this event says what a held PENDING one would
	}
	ev := protocol.Event{
		V: protocol.Version, JobID: rec.JobID, ExecID: rec.ExecID, Attempt: rec.Attempt,
		From: tr.from, Via: tr.via, To: tr.to, Reason: tr.reason, At: rec.UpdatedAt, Agent: rec.Agent,
		Outcome: rec.Outcome, Result: rec.Result,
	}
	if tr.to == protocol.StateRetryWaiting {
		ev.NextAttemptAt = rec.NextAttemptAt
	}
	// The snapshot feeds the history index (history.go); its result is the
	// event's own (not carried twice).
	snap := rec.Execution
	snap.Result = nil
	ev.Execution = &snap
	if ev.Attempt < 1 {
		ev.Attempt = 1
	}
	data, err := protocol.Encode(ev)
	if err != nil {
		c.log.Error("encode event", "exec", rec.ExecID, "to", tr.to, "err", err)
		return nil
	}
	msgID := protocol.EventMsgID(rec.ExecID, ev.Attempt, tr.to)
	idx := snapshotOf(ev) // what the history follower's decode makes of it
	if idx.Result != nil {
		r := *idx.Result // not shared with the record
		idx.Result = &r
	}
	c.evMemo.put(msgID, data, idx)
	idHeader := jetstream.MsgIDHeader
	if tr.to == protocol.StatePending {
		idHeader = protocol.EventIDHeader
	}
	msg := &nats.Msg{Subject: protocol.EventSubject(tr.to, rec.JobID), Data: data, Header: nats.Header{idHeader: []string{msgID}}}
	fut, err := c.js.PublishMsgAsync(msg, jetstream.WithStallWait(asyncStallWait))
	if err != nil {
		c.log.Warn("publish event", "exec", rec.ExecID, "to", tr.to, "err", err)
		return nil
	}
	return fut
}

// logTransition writes the controller's side of an execution's log trail:
// at info one line per execution, when it ends (finished, skipped) or
// waits for a retry; at debug also created, triggered and running (with
// lag). Info is the level a busy controller runs at: the full trail cost
// four lines per execution on the hot path.
func (c *execService) logTransition(rec *execRecord, tr transition) {
	level := slog.LevelInfo
	switch tr.to {
	case protocol.StatePending, protocol.StateTriggered, protocol.StateRunning:
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !c.log.Enabled(ctx, level) {
		return // skip building the attributes (hot path at thousands per second)
	}
	base := []any{"exec", rec.ExecID, "job", rec.JobID, "attempt", rec.Attempt, "agent", rec.Agent, "from", string(tr.from)}
	switch tr.to {
	case protocol.StatePending:
		c.log.Debug("execution created", append(base, "state", tr.to, "scheduled_at", rec.ScheduledAt)...)
	case protocol.StateTriggered:
		c.log.Debug("execution triggered", append(base, "state", tr.to, "scheduled_at", rec.ScheduledAt, "triggered_at", rec.TriggeredAt)...)
	case protocol.StateRunning:
		c.log.Debug("execution running", append(base, "state", tr.to, "started_at", rec.StartedAt, "lag", rec.Lag.D())...)
	case protocol.StateRetryWaiting:
		c.log.Info("execution retry scheduled", append(base, "state", tr.to, "outcome", rec.Outcome, "reason", tr.reason,
			"next_attempt_at", rec.NextAttemptAt, "duration", rec.Duration.D())...)
	case protocol.StateSkipped:
		c.log.Info("execution skipped", append(base, "state", tr.to, "reason", tr.reason)...)
	default:
		c.log.Info("execution finished", append(base, "state", tr.to, "outcome", rec.Outcome, "reason", tr.reason,
			"suspect", rec.Suspect, "lag", rec.Lag.D(), "duration", rec.Duration.D())...)
	}
}

// publishCommand validates and publishes one command to an agent's
// subject; msgID ("" for none) lets the stream drop a re-send.
func (c *execService) publishCommand(ctx context.Context, cmd protocol.Command, msgID string) error {
	cmd.V = protocol.Version
	cmd.IssuedAt = c.now()
	data, err := protocol.Encode(cmd)
	if err != nil {
		return err
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.js.Publish(ctx, protocol.CommandSubject(cmd.Agent), data, opts...); err != nil {
		return err
	}
	c.m.commands.WithLabelValues(string(cmd.Kind)).Inc()
	return nil
}

// sendRun asks agent for attempt of an execution at runAt.
func (c *execService) sendRun(ctx context.Context, job protocol.Job, rec *execRecord, attempt int, runAt time.Time) error {
	cmd := protocol.Command{Kind: protocol.CmdRun, Agent: rec.Agent, Run: &protocol.Run{
		Job: job, ExecID: rec.ExecID, Attempt: attempt, RunAt: runAt, Epoch: rec.Epoch,
	}}
	return c.publishCommand(ctx, cmd, runMsgID(rec, attempt))
}
