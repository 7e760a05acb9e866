package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// ResponderQueue is the queue group of the registration and heartbeat
// responders, so that controller replicas share them (the controller's
// consumer gateway uses it too).
const ResponderQueue = "ax-controller"

// followAgents reads KV ax_agents into the registry before returning, then
// keeps following it: registrations and heartbeats answered by other
// replicas reach this one's registry too.
func (s *agentStore) followAgents(ctx context.Context) error {
	w, err := s.kv.Agents.WatchAll(s.ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	apply := func(e jetstream.KeyValueEntry) {
		if s.agents.hasRev(e.Key(), e.Revision()) {
			// This replica's own write, recorded when written (the
			// liveness writes come back here a thousand times a second
			// at 10,000 agents): nothing to decode.
			return
		}
		var a protocol.AgentInfo
		if err := json.Unmarshal(e.Value(), &a); err != nil {
			s.log.Error("bad agent record in KV", "key", e.Key(), "err", err)
			return
		}
		a.Online = IsOnline(a, s.now(), s.cfg.AgentOfflineAfter)
		if _, ok := s.agents.putRev(a, e.Revision()); ok && !a.Revoked && !a.HeartbeatAt.IsZero() {
			// The stats of the agent's last heartbeat (this record's, or
			// a later one answered here and not written), until its next.
			if cur, ok := s.agents.Get(a.Agent); ok {
				s.m.agentStats(a.Agent, cur.Stats)
			}
		}
	}
	if err := s.follow(ctx, w, apply); err != nil {
		return err
	}
	if err := s.followLiveness(ctx); err != nil {
		return err
	}
	_, online, known := s.agents.sweep(s.now(), s.cfg.AgentOfflineAfter)
	s.m.agentsOnline.Set(float64(online))
	s.m.agentsKnown.Set(float64(known))
	return nil
}

// StartResponders starts the registration and heartbeat workers and the
// liveness writers, subscribes the responders (queue group
// ResponderQueue) and returns their subscriptions (those made, also on an
// error). agents is ax_agents as the heartbeat path writes it (the
// registry's kv; the controller's tests wrap it to delay the writes).
// LoadAgents comes first.
func (f *Fleet) StartResponders(agents jetstream.KeyValue) (subs []*nats.Subscription, err error) {
	f.startRegisterWorkers()
	f.agents.kv = agents
	f.store.startLivenessWriters()
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{protocol.SubjectRegisterAll, f.enqueueRegister}, {protocol.SubjectHeartbeatAll, f.startHeartbeatWorkers()}} {
		sub, err := f.nc.QueueSubscribe(s.subj, ResponderQueue, s.h)
		if err != nil {
			return subs, fmt.Errorf("subscribe %s: %w", s.subj, err)
		}
		subs = append(subs, sub)
	}
	return subs, f.nc.Flush()
}

func respond(msg *nats.Msg, v any) {
	data, err := json.Marshal(v)
	if err == nil {
		_ = msg.Respond(data)
	}
}

// handleRegister answers an agent's registration: records it in ax_agents
// (with the controller's labels, labels.go), re-sends its assignments when
// it is new, its command cursor is behind the AX_CMD stream's first
// sequence or its store lost its state (storeLost), adjusts group jobs
// whose membership it changes, and replies with controller time, the
// shard count, its labels and where to resume reading commands.
// received is when the request arrived (f.mono()); its reply subject
// was checked when it was queued (enqueueRegister).
func (f *Fleet) handleRegister(msg *nats.Msg, received time.Time) {
	ctx := f.ctx
	fail := func(reason string, args ...any) {
		f.log.Warn("registration refused", append([]any{"subject", msg.Subject, "reason", reason}, args...)...)
		respond(msg, protocol.RegisterReply{V: protocol.Version, Error: reason})
	}
	r, err := protocol.DecodeRegister(msg.Data)
	if err != nil {
		fail("invalid registration: "+err.Error(), "err", err)
		return
	}
	if tok := strings.TrimPrefix(msg.Subject, "ax.reg."); tok != r.Agent {
		fail(fmt.Sprintf("agent %q registered on the subject of %q", r.Agent, tok))
		return
	}
	behind := f.cursorBehind(ctx, r.Cursor, received) // before the lock: it may read the stream
	now := f.now()
	unlock := f.locks.lock(r.Agent) // until the agent is recorded, not across the reply
	var labels map[string]string
	var resumeAfter uint64 // > 0: its store lost its state (storeLost)
	// KV first, outside the assign lock (compare-and-set, agentwrite.go).
	w, err := f.store.writeAgent(ctx, r.Agent, func(prev protocol.AgentInfo, existed bool) (protocol.AgentInfo, bool, error) {
		if existed && prev.Revoked {
			return prev, false, errRegisterRevoked
		}
		var from string
		labels, from = f.registrationLabels(r.Agent, prev, existed, r.Labels)
		info := protocol.AgentInfo{
			Agent: r.Agent, Labels: labels, LabelsFrom: from, Handlers: r.Handlers, Version: r.Version, OS: r.OS, Arch: r.Arch,
			Online: true, RegisteredAt: now, LastSeen: now, ClockOffset: protocol.Duration(now.Sub(r.SentAt)),
			Leases: r.Leases, Boot: r.Boot, Cursor: r.Cursor,
		}
		// An enrolled agent has a record (its labels) before it first registers.
		before := existed && Registered(prev)
		resumeAfter = 0
		if before && storeLost(prev, r) {
			last, err := f.host.LastCommandSeq(ctx, r.Agent)
			if err != nil {
				return info, false, fmt.Errorf("%w: %w", errRegisterCommands, err)
			}
			if last > r.Cursor {
				resumeAfter = last
			}
		}
		if before {
			info.RegisteredAt, info.Stats, info.HeartbeatAt = prev.RegisteredAt, prev.Stats, prev.HeartbeatAt
			info.Cursor = max(r.Cursor, prev.Cursor, resumeAfter)
		}
		return info, true, nil
	})
	prev, existed, info := w.prev, w.existed, w.info
	if err != nil {
		unlock()
	}
	switch {
	case errors.Is(err, errRegisterRevoked):
		fail("agent is revoked", "agent", r.Agent)
		return
	case errors.Is(err, errRegisterCommands):
		fail("controller could not read the agent's commands, retry", "agent", r.Agent, "err", err)
		return
	case err != nil:
		fail("controller could not store the registration, retry", "agent", r.Agent, "err", err)
		return
	}
	before := existed && Registered(prev)
	if !maps.Equal(r.Labels, labels) {
		f.m.labelsIgnored.Inc()
		f.log.Warn("registration labels ignored: the controller's labels stand (change them with agent label)",
			"agent", r.Agent, "claimed", r.Labels, "labels", labels, "labels_from", info.LabelsFrom)
	}
	resend := !before || resumeAfter > 0 || behind
	var prevp *protocol.AgentInfo
	if before {
		prevp = &prev
	}
	f.assign.Lock()
	wasOnline, _ := f.agents.putRev(info, w.rev)
	f.host.ReconcileAgent(ctx, prevp, info, resend)
	f.host.PlaceUnplaced(ctx, info) // nothing to do without unplaced runs
	f.assign.Unlock()
	unlock()
	if !existed || !Registered(prev) || !IsOnline(prev, now, f.cfg.AgentOfflineAfter) {
		f.agentGauges() // O(1): only when the online or known count changes
	}
	if resumeAfter > 0 {
		f.m.storeResets.Inc()
		f.log.Warn("agent store lost its state: it resumes after the commands already sent", "agent", r.Agent,
			"cursor", r.Cursor, "fresh", r.Fresh, "previous_cursor", prev.Cursor, "resume_after", resumeAfter)
		f.goRun(func(ctx context.Context) { f.host.ResendRuns(ctx, r.Agent, resumeAfter) })
	}
	respond(msg, protocol.RegisterReply{V: protocol.Version, ControllerTime: f.now(), Shards: f.cfg.Shards,
		HeartbeatInterval: protocol.Duration(f.cfg.HeartbeatInterval), Labels: labels, ResumeAfter: resumeAfter})
	f.log.Info("agent registered", "agent", r.Agent, "new", !before, "was_online", wasOnline, "cursor", r.Cursor,
		"resent_assignments", resend, "resume_after", resumeAfter, "version", r.Version, "arch", r.Arch,
		"clock_offset", info.ClockOffset.D())
}

// storeLost reports whether registration r of an agent whose record is
// prev says that the agent's store lost its state (agent.db wiped,
// truncated or replaced): it registers without a command cursor
// (Register.Fresh) or with one below the cursor it registered with
// before. It then resumes after the last command sent to it
// (RegisterReply.ResumeAfter) and the host sends again what that skips
// (Host.ResendRuns; the controller's storeloss.go).
func storeLost(prev protocol.AgentInfo, r protocol.Register) bool {
	return Registered(prev) && (r.Fresh || r.Cursor < prev.Cursor)
}

// cursorBehind reports whether commands after cursor were already removed
// from AX_CMD (by age), so that the agent cannot read them any more. The
// stream's first sequence is read once for all the registrations that
// arrived before the read started (regpool.go).
func (f *Fleet) cursorBehind(ctx context.Context, cursor uint64, received time.Time) bool {
	first, err := f.regs.firstSeq(ctx, f.env, received)
	if err != nil {
		f.log.Warn("read AX_CMD state; re-sending assignments to be safe", "err", err)
		return true
	}
	return cursor+1 < first
}

// handleHeartbeat records an agent's liveness and stats, renews the
// group-job leases it still holds (Host.RenewLeases) and replies with
// controller time, the renewals and the leases it lost.
func (f *Fleet) handleHeartbeat(msg *nats.Msg) {
	hb, err := protocol.DecodeHeartbeat(msg.Data)
	if err != nil {
		f.log.Warn("heartbeat rejected", "subject", msg.Subject, "err", err)
		respond(msg, protocol.HeartbeatReply{V: protocol.Version, Error: "invalid heartbeat: " + err.Error()})
		return
	}
	if tok := strings.TrimPrefix(msg.Subject, "ax.hb."); tok != hb.Agent {
		respond(msg, protocol.HeartbeatReply{V: protocol.Version, Error: fmt.Sprintf("agent %q sent a heartbeat on the subject of %q", hb.Agent, tok)})
		return
	}
	unlock := f.locks.lock(hb.Agent)
	info, rev, kvSeen, ok := f.agents.getRev(hb.Agent)
	prev := info
	if !ok || info.Revoked || !Registered(info) {
		unlock()
		respond(msg, protocol.HeartbeatReply{V: protocol.Version, Error: "unknown agent: register again"})
		return
	}
	if hb.Stopping && hb.Boot != info.Boot {
		// A late message of an earlier run of the agent: the current run
		// registered since and may hold (and fire on) these leases.
		unlock()
		f.log.Warn("stopping heartbeat of an earlier agent process ignored", "agent", hb.Agent, "boot", hb.Boot, "current_boot", info.Boot)
		respond(msg, protocol.HeartbeatReply{V: protocol.Version, ControllerTime: f.now(), Lost: hb.Leases})
		return
	}
	now := f.now()
	info.LastSeen, info.HeartbeatAt, info.Stats, info.Online, info.Leases = now, now, hb.Stats, true, hb.Leases
	// The cursor only goes up here; it reaches ax_agents with the next
	// write of the record (no write of its own), and the removal of
	// applied commands follows the stored one (controller/cmdprune.go).
	info.Cursor = max(info.Cursor, hb.Cursor)
	info.StoppedAt = time.Time{}
	if hb.Stopping {
		info.StoppedAt, info.Online = now, false
	}
	if hb.Stats.ClockOffset != 0 {
		info.ClockOffset = hb.Stats.ClockOffset
	} else {
		info.ClockOffset = protocol.Duration(now.Sub(hb.SentAt))
	}
	var wasOnline bool
	switch {
	case !hb.Stopping && len(hb.Leases) == 0 && len(prev.Leases) == 0:
		// Nothing in the reply depends on a write: answered from memory,
		// written by the liveness writers when due (agentstore.go). A
		// record revoked or removed by another replica meanwhile is told
		// at the next heartbeat.
		wasOnline, _ = f.agents.putLive(info)
		f.m.agentStats(hb.Agent, hb.Stats)
		unlock()
		respond(msg, protocol.HeartbeatReply{V: protocol.Version, ControllerTime: f.now()})
		if f.store.heartbeatWrite(prev, info, kvSeen, now) {
			f.agents.live.mark(hb.Agent)
		}
		if !wasOnline {
			f.log.Info("agent online", "agent", hb.Agent)
			f.agentGauges()
		}
		return
	case f.store.heartbeatWrite(prev, info, kvSeen, now):
		stored, nrev, err := f.store.storeLiveness(f.ctx, info, rev)
		switch {
		case errors.Is(err, errAgentGone):
			f.agents.putRev(stored, nrev)
			unlock()
			respond(msg, protocol.HeartbeatReply{V: protocol.Version, Error: "unknown agent: register again"})
			return
		case err != nil:
			f.log.Warn("store heartbeat", "agent", hb.Agent, "err", err)
			wasOnline = f.agents.put(info)
		default:
			info = stored
			wasOnline, _ = f.agents.putRev(info, nrev)
		}
	default: // the same leases, online: only the liveness changed
		wasOnline, _ = f.agents.putLive(info)
	}
	f.m.agentStats(hb.Agent, hb.Stats)
	unlock()
	var renewed []protocol.Lease
	var lost []protocol.HeldLease
	switch {
	case hb.Stopping:
		f.log.Info("agent stopping: its group leases are handed back", "agent", hb.Agent, "leases", len(hb.Leases))
		f.agentGauges()
		f.host.ReleaseLeases(f.ctx, hb.Agent, hb.Leases)
		lost = hb.Leases
	case !wasOnline:
		f.log.Info("agent online", "agent", hb.Agent)
		f.agentGauges()
	}
	if len(hb.Leases) > 0 && !hb.Stopping {
		renewed, lost = f.host.RenewLeases(f.ctx, info, hb.Leases)
	}
	respond(msg, protocol.HeartbeatReply{V: protocol.Version, ControllerTime: f.now(), Renewed: renewed, Lost: lost})
}
