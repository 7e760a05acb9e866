package agent

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"strconv"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
)

// Registration: the request with the command cursor, the resume after
// it, and the clock offset kept from the answer.

func (l *link) register(ctx context.Context) error {
	a := l.a
	cursor, stored, err := l.storedCursor(ctx)
	if err != nil {
		return err
	}
	t0 := a.clk.Now()
	leases := a.sched.View().Held(t0)
	req := protocol.Register{V: protocol.Version, Agent: a.cfg.ID, Labels: a.cfg.Labels, Handlers: a.names,
		Version: truncate(a.version, 64), OS: runtime.GOOS, Arch: runtime.GOARCH, Cursor: cursor, SentAt: t0.Round(0).UTC(), Leases: leases, Boot: a.boot,
		Fresh: !stored}
	data, err := protocol.Encode(req)
	if err != nil {
		return err
	}
	msg, err := l.request(ctx, protocol.RegisterSubject(a.cfg.ID), data)
	if err != nil {
		return err
	}
	t2 := a.clk.Now()
	rep, err := protocol.DecodeRegisterReply(msg.Data)
	if err != nil {
		return err
	}
	if rep.Error != "" {
		l.busyFor.Store(int64(rep.RetryAfter))
		return errors.Join(errRefused, errors.New(rep.Error))
	}
	l.offsets.reset()
	off := l.offsets.add(t0.Round(0), rep.ControllerTime, t2.Round(0))
	a.offset.Store(int64(off))
	a.shards.Store(int64(rep.Shards))
	if rep.HeartbeatInterval > 0 {
		l.hb.Store(int64(rep.HeartbeatInterval))
	}
	// Stored for a restart without a controller, not waited for: a
	// registration never queues behind a backlog of store writes (the
	// values in memory are the ones used; a later registration or
	// heartbeat stores them if this write does not happen).
	l.savedOffset.Store(int64(off))
	if !a.st.TrySubmit(func(tx *store.Tx) error {
		if err := tx.SetMeta(store.MetaShards, strconv.Itoa(rep.Shards)); err != nil {
			return err
		}
		return tx.SetMeta(store.MetaClockOffset, strconv.FormatInt(int64(off), 10))
	}, func(err error) {
		if err != nil {
			l.savedOffset.Store(0)
		}
	}) {
		l.savedOffset.Store(0)
	}
	a.sched.CheckSkew()
	if rep.ResumeAfter > cursor {
		if err := l.resumeAfter(ctx, cursor, rep.ResumeAfter); err != nil {
			return err
		}
		cursor = rep.ResumeAfter
	}
	if !maps.Equal(rep.Labels, a.cfg.Labels) {
		a.log.Warn("the controller's labels for this agent differ from the config's; the controller's count "+
			"(ax-controller agent label changes them)", "controller_labels", rep.Labels, "config_labels", a.cfg.Labels)
	}
	a.log.Info("registered", "cursor", cursor, "shards", rep.Shards, "clock_offset", off,
		"heartbeat", time.Duration(l.hb.Load()))
	return nil
}

// resumeAfter moves the command cursor from cursor to seq, as the
// controller says when this agent's store lost its state: the commands up
// to seq were applied before (their runs ran) or are superseded, and the
// controller sends the assignments and pending runs again after seq.
func (l *link) resumeAfter(ctx context.Context, cursor, seq uint64) error {
	v := strconv.FormatUint(seq, 10)
	if err := l.a.st.Do(ctx, func(tx *store.Tx) error { return tx.SetMeta(store.MetaCursor, v) }); err != nil {
		return err
	}
	l.mu.Lock()
	l.lastSeq = max(l.lastSeq, seq)
	l.mu.Unlock()
	l.a.log.Warn("the store lost its command history: commands already sent are skipped, not run again; "+
		"the controller sends the assignments and pending runs again", "cursor", cursor, "resume_after", seq)
	return nil
}

// persistOffset stores the clock offset measured by a heartbeat (so a
// restart without a controller starts from it) when it moved by more than
// a millisecond since it was last stored.
func (l *link) persistOffset(off time.Duration) {
	if d := off - time.Duration(l.savedOffset.Load()); d < time.Millisecond && d > -time.Millisecond {
		return
	}
	l.savedOffset.Store(int64(off))
	v := strconv.FormatInt(int64(off), 10)
	// Not waiting for room in a full write queue: a later heartbeat stores it.
	if !l.a.st.TrySubmit(func(tx *store.Tx) error { return tx.SetMeta(store.MetaClockOffset, v) }, func(err error) {
		if err != nil {
			l.savedOffset.Store(0)
		}
	}) {
		l.savedOffset.Store(0)
	}
}

func (l *link) cursor(ctx context.Context) (uint64, error) {
	c, _, err := l.storedCursor(ctx)
	return c, err
}

// storedCursor returns the command cursor and whether the store has one
// (a new store, or one that lost its state, has none).
func (l *link) storedCursor(ctx context.Context) (uint64, bool, error) {
	v, ok, err := l.a.st.Meta(ctx, store.MetaCursor)
	if err != nil || !ok {
		return 0, false, err
	}
	c, err := strconv.ParseUint(v, 10, 64)
	return c, err == nil, err
}
