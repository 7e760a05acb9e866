package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/axsched/ax/pkg/protocol"
)

// Heartbeats: one request each, with the lease claims and the stats, and
// the group leases handed back at stop.

func (l *link) heartbeat(ctx context.Context) error {
	a := l.a
	// The scheduler's view, not a call: a heartbeat never waits behind
	// the scheduler's backlog (scheduler.View).
	v := a.sched.View()
	st, leases := v.Stats, v.Claims()
	if c, err := a.st.Counts(ctx); err == nil {
		// From SQLite: the queue includes executions spilled out of memory.
		st.OutboxDepth, st.QueueDepth, st.Pending = c.Outbox, c.Triggered, c.Pending
	}
	var cursor uint64
	if a.cfg.NATS.ReportCursor {
		// As committed: the controller removes the commands up to it.
		c, err := l.cursor(ctx)
		if err != nil {
			return fmt.Errorf("heartbeat: read the command cursor: %w", err)
		}
		cursor = c
	}
	t0 := a.clk.Now()
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: a.cfg.ID, SentAt: t0.Round(0).UTC(), Stats: st, Leases: leases, Boot: a.boot, Cursor: cursor})
	if err != nil {
		return err
	}
	msg, err := l.request(ctx, protocol.HeartbeatSubject(a.cfg.ID), data)
	if err != nil {
		return err
	}
	t2 := a.clk.Now()
	rep, err := protocol.DecodeHeartbeatReply(msg.Data)
	if err != nil {
		return err
	}
	if rep.Error != "" {
		l.reg.Store(false)
		l.signal()
		return errors.Join(errRefused, errors.New(rep.Error))
	}
	off := l.offsets.add(t0.Round(0), rep.ControllerTime, t2.Round(0))
	a.offset.Store(int64(off))
	l.persistOffset(off)
	a.sched.HeartbeatReply(t0, rep.Renewed, rep.Lost)
	return nil
}

// release sends a last heartbeat saying the agent is stopping, with its
// group-job claims, so that the controller moves those jobs at once. It is
// called after the scheduler stopped (nothing fires any more); it is best
// effort and bounded by nats.request_timeout.
func (l *link) release(claims []protocol.HeldLease) {
	a := l.a
	if len(claims) == 0 || !l.reg.Load() {
		return
	}
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: a.cfg.ID, SentAt: a.clk.Now().Round(0).UTC(),
		Leases: claims, Stopping: true, Boot: a.boot})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.NATS.RequestTimeout)
	defer cancel()
	if _, err := l.request(ctx, protocol.HeartbeatSubject(a.cfg.ID), data); err != nil {
		a.log.Warn("could not hand the group leases back; they move after their TTL", "leases", len(claims), "err", err)
		return
	}
	a.log.Info("group leases handed back", "leases", len(claims))
}
