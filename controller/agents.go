package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// responderQueue is the queue group of the registration and heartbeat
// responders, so that controller replicas share them.
const responderQueue = "ax-controller"

// agentRegistry mirrors KV ax_agents in memory. Writes go through the
// registration and heartbeat handlers (which also write KV).
type agentRegistry struct {
	mu     sync.RWMutex
	agents map[string]*agentEntry
	n      agentCounts // kept current by putRev and sweep (agentcounts.go)
	// live: agents whose liveness in memory is still to be written to
	// ax_agents (agentstore.go).
	live *livenessQueue
	// kv is ax_agents as the heartbeat path writes it (liveness), set at
	// start (Controller.wrapKV).
	kv jetstream.KeyValue
}

type agentEntry struct {
	info   protocol.AgentInfo
	online bool   // as last seen by the liveness loop
	rev    uint64 // KV revision of info (0: written here, revision unknown)
	// kvSeen is LastSeen as stored at rev; info.LastSeen may be later (a
	// heartbeat answered here and not written, agentstore.go).
	kvSeen time.Time
	// heard is when this replica last answered a heartbeat of the agent
	// from memory (its liveness digest carries it, livedigest.go).
	heard time.Time
}

func newAgentRegistry() *agentRegistry {
	return &agentRegistry{agents: map[string]*agentEntry{}, live: newLivenessQueue()}
}

func cloneAgent(a protocol.AgentInfo) protocol.AgentInfo {
	if a.Labels != nil {
		l := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			l[k] = v
		}
		a.Labels = l
	}
	a.Handlers = slices.Clone(a.Handlers)
	a.Leases = slices.Clone(a.Leases)
	return a
}

// getRev returns agent id's record, its KV revision and the last-seen
// time stored at that revision.
func (r *agentRegistry) getRev(id string) (protocol.AgentInfo, uint64, time.Time, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.agents[id]
	if !ok {
		return protocol.AgentInfo{}, 0, time.Time{}, false
	}
	return cloneAgent(e.info), e.rev, e.kvSeen, true
}

func (r *agentRegistry) get(id string) (protocol.AgentInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.agents[id]
	if !ok {
		return protocol.AgentInfo{}, false
	}
	return cloneAgent(e.info), true
}

// put records info and returns whether the agent was online before.
func (r *agentRegistry) put(info protocol.AgentInfo) (wasOnline bool) {
	wasOnline, _ = r.putRev(info, 0)
	return wasOnline
}

// putRev records info read from KV at revision rev, unless a newer
// revision is recorded already (another replica's write seen late).
func (r *agentRegistry) putRev(info protocol.AgentInfo, rev uint64) (wasOnline, applied bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[info.Agent]
	if !ok {
		e = &agentEntry{}
		r.agents[info.Agent] = e
	}
	wasOnline = e.online
	if rev != 0 && rev < e.rev {
		return wasOnline, false
	}
	r.n.add(e, -1)
	defer r.n.add(e, 1)
	kvSeen := info.LastSeen
	if rev != 0 && e.info.Boot == info.Boot && e.info.LastSeen.After(info.LastSeen) && info.StoppedAt.IsZero() {
		// A heartbeat answered here since, not written (agentstore.go).
		info.LastSeen, info.HeartbeatAt, info.Online, info.Stats = e.info.LastSeen, e.info.HeartbeatAt, e.info.Online, e.info.Stats
	}
	e.info = cloneAgent(info)
	e.online = info.Online
	if rev != 0 {
		e.rev, e.kvSeen = rev, kvSeen
	}
	return wasOnline, true
}

// putLive records the liveness of heartbeat info (last seen, heartbeat
// time, stats, clock offset, online, not stopped) on agent info.Agent's
// current record, whatever else changed in it since info was read (a
// label change or registration seen meanwhile stays, with its revision).
// It returns whether the agent was online before; ok is false when the
// agent is not known.
func (r *agentRegistry) putLive(info protocol.AgentInfo) (wasOnline, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[info.Agent]
	if !ok {
		return false, false
	}
	wasOnline = e.online
	r.n.add(e, -1)
	e.info.LastSeen, e.info.HeartbeatAt, e.info.Stats, e.info.ClockOffset = info.LastSeen, info.HeartbeatAt, info.Stats, info.ClockOffset
	e.info.Online, e.info.StoppedAt = info.Online, info.StoppedAt
	e.online = info.Online
	e.heard = info.LastSeen
	r.n.add(e, 1)
	return wasOnline, true
}

// snapshot returns every agent sorted by id.
func (r *agentRegistry) snapshot() []protocol.AgentInfo {
	r.mu.RLock()
	out := make([]protocol.AgentInfo, 0, len(r.agents))
	for _, e := range r.agents {
		out = append(out, cloneAgent(e.info))
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, k int) bool { return out[i].Agent < out[k].Agent })
	return out
}

// onlineIDs returns the agents online at now.
func (r *agentRegistry) onlineIDs(now time.Time, after time.Duration) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for id, e := range r.agents {
		if isOnline(e.info, now, after) {
			out = append(out, id)
		}
	}
	return out
}

// sweep recomputes online flags at now and returns the agents that went
// offline, the online count and the count of known (not revoked) agents.
func (r *agentRegistry) sweep(now time.Time, after time.Duration) (wentOffline []string, online, known int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.agents {
		if !e.info.Revoked && registered(e.info) {
			known++
		}
		on := isOnline(e.info, now, after)
		if e.online && !on {
			wentOffline = append(wentOffline, id)
		}
		e.online = on
		if on {
			online++
		}
	}
	sort.Strings(wentOffline)
	r.n = agentCounts{online: online, known: known}
	return wentOffline, online, known
}

func isOnline(a protocol.AgentInfo, now time.Time, after time.Duration) bool {
	stopped := !a.StoppedAt.IsZero() && !a.StoppedAt.Before(a.LastSeen)
	return !a.Revoked && !stopped && !a.LastSeen.IsZero() && now.Sub(a.LastSeen) <= after
}

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
		a.Online = isOnline(a, s.now(), s.cfg.AgentOfflineAfter)
		if _, ok := s.agents.putRev(a, e.Revision()); ok && !a.Revoked && !a.HeartbeatAt.IsZero() {
			// The stats of the agent's last heartbeat (this record's, or
			// a later one answered here and not written), until its next.
			if cur, ok := s.agents.get(a.Agent); ok {
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

// startResponders subscribes the registration and heartbeat responders
// and returns their subscriptions (those made, also on an error). agents
// is ax_agents as the heartbeat path writes it (registry.kv).
func (f *fleet) startResponders(agents jetstream.KeyValue) (subs []*nats.Subscription, err error) {
	f.startRegisterWorkers()
	f.agents.kv = agents
	f.store.startLivenessWriters()
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{protocol.SubjectRegisterAll, f.enqueueRegister}, {protocol.SubjectHeartbeatAll, f.startHeartbeatWorkers()}} {
		sub, err := f.nc.QueueSubscribe(s.subj, responderQueue, s.h)
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
// sequence or its store lost its state (storeloss.go), adjusts group jobs
// whose membership it changes, and replies with controller time, the
// shard count, its labels and where to resume reading commands.
// received is when the request arrived (f.mono()).
func (f *fleet) handleRegister(msg *nats.Msg, received time.Time) {
	if !f.replyAllowed(endpointRegister, strings.TrimPrefix(msg.Subject, "ax.reg."), msg) {
		return
	}
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
	var resumeAfter uint64 // > 0: its store lost its state (storeloss.go)
	// KV first, outside assignMu (compare-and-set, agentwrite.go).
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
		before := existed && registered(prev)
		resumeAfter = 0
		if before && storeLost(prev, r) {
			last, err := f.host.lastCommandSeq(ctx, r.Agent)
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
	before := existed && registered(prev)
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
	f.host.reconcileAgent(ctx, prevp, info, resend)
	f.host.placeUnplaced(ctx, info) // nothing to do without unplaced runs
	f.assign.Unlock()
	unlock()
	if !existed || !registered(prev) || !isOnline(prev, now, f.cfg.AgentOfflineAfter) {
		f.agentGauges() // O(1): only when the online or known count changes
	}
	if resumeAfter > 0 {
		f.m.storeResets.Inc()
		f.log.Warn("agent store lost its state: it resumes after the commands already sent", "agent", r.Agent,
			"cursor", r.Cursor, "fresh", r.Fresh, "previous_cursor", prev.Cursor, "resume_after", resumeAfter)
		f.goRun(func(ctx context.Context) { f.host.resendRuns(ctx, r.Agent, resumeAfter) })
	}
	respond(msg, protocol.RegisterReply{V: protocol.Version, ControllerTime: f.now(), Shards: f.cfg.Shards,
		HeartbeatInterval: protocol.Duration(f.cfg.HeartbeatInterval), Labels: labels, ResumeAfter: resumeAfter})
	f.log.Info("agent registered", "agent", r.Agent, "new", !before, "was_online", wasOnline, "cursor", r.Cursor,
		"resent_assignments", resend, "resume_after", resumeAfter, "version", r.Version, "arch", r.Arch,
		"clock_offset", info.ClockOffset.D())
}

// cursorBehind reports whether commands after cursor were already removed
// from AX_CMD (by age), so that the agent cannot read them any more. The
// stream's first sequence is read once for all the registrations that
// arrived before the read started (regpool.go).
func (f *fleet) cursorBehind(ctx context.Context, cursor uint64, received time.Time) bool {
	first, err := f.regs.firstSeq(ctx, f.fleetEnv, received)
	if err != nil {
		f.log.Warn("read AX_CMD state; re-sending assignments to be safe", "err", err)
		return true
	}
	return cursor+1 < first
}

// handleHeartbeat records an agent's liveness and stats, renews the
// group-job leases it still holds (grouplease.go) and replies with
// controller time, the renewals and the leases it lost.
func (f *fleet) handleHeartbeat(msg *nats.Msg) {
	if !f.replyAllowed(endpointHeartbeat, strings.TrimPrefix(msg.Subject, "ax.hb."), msg) {
		return
	}
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
	if !ok || info.Revoked || !registered(info) {
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
		f.host.releaseLeases(f.ctx, hb.Agent, hb.Leases)
		lost = hb.Leases
	case !wasOnline:
		f.log.Info("agent online", "agent", hb.Agent)
		f.agentGauges()
	}
	if len(hb.Leases) > 0 && !hb.Stopping {
		renewed, lost = f.host.renewLeases(f.ctx, info, hb.Leases)
	}
	respond(msg, protocol.HeartbeatReply{V: protocol.Version, ControllerTime: f.now(), Renewed: renewed, Lost: lost})
}
