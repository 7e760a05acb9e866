package fleet

import (
	"fmt"
	"maps"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// Agent labels select agents for group jobs, so an agent must not choose
// its own: the controller's copy in ax_agents is authoritative
// (AgentInfo.LabelsFrom says who set it).
//
//   - nats.auth nkeys: the labels given at `agent enroll` (stored in the
//     agent's ax_agents record when it is enrolled, before it ever
//     registers).
//   - No enrollment (nats.auth none, an external server): the labels of the
//     agent's first registration, trusted once.
//   - Afterwards only an operator changes them (LabelAgent, `agent label`).
//
// Labels in a later registration that differ are ignored, logged and
// counted (ax_agent_labels_ignored_total); the registration is not refused,
// because a device whose config file still has its old labels after an
// operator changed them must keep running its jobs. The reply tells the
// agent the labels that count.

// registrationLabels returns the labels of registering agent id and who
// set them: its record's, else its enrollment's, else claimed (its
// registration's). prev is its record, if existed. A record written by an
// older controller (no LabelsFrom) keeps the labels in effect.
func (f *Fleet) registrationLabels(id string, prev protocol.AgentInfo, existed bool, claimed map[string]string) (map[string]string, string) {
	if existed && prev.LabelsFrom != "" {
		return prev.Labels, prev.LabelsFrom
	}
	if existed && Registered(prev) {
		return prev.Labels, protocol.LabelsFromRegistration
	}
	if f.auth != nil {
		if a, ok := f.auth.reg.Get(id); ok {
			return maps.Clone(a.Labels), protocol.LabelsFromEnrollment
		}
	}
	return claimed, protocol.LabelsFromRegistration
}

// setEnrolled records agent id's enrollment in ax_agents: the labels of
// the request become the controller's (a request without labels keeps
// those it has), and a revoked mark is cleared. An agent never registered
// gets a record that holds its labels until it registers. Group
// membership follows at once.
func (f *Fleet) setEnrolled(id string, req auth.EnrollRequest) error {
	ctx := f.ctx
	defer f.locks.lock(id)()
	enroll := func(cur protocol.AgentInfo, exists bool) (protocol.AgentInfo, bool, error) {
		info := cloneAgent(cur)
		if !exists {
			info = protocol.AgentInfo{Agent: id}
		}
		if req.Labels != nil {
			info.Labels, info.LabelsFrom = maps.Clone(req.Labels), protocol.LabelsFromEnrollment
			if len(info.Labels) == 0 {
				info.Labels = nil
			}
		}
		if info.LabelsFrom == "" {
			info.LabelsFrom = protocol.LabelsFromEnrollment
		}
		info.Revoked = false
		unchanged := exists && maps.Equal(info.Labels, cur.Labels) && info.LabelsFrom == cur.LabelsFrom && !cur.Revoked
		return info, !unchanged, nil
	}
	f.assign.Lock()
	prev, rev, _, ok := f.agents.getRev(id)
	info, changed, _ := enroll(prev, ok)
	if changed {
		// Memory first: a registration answered now uses these labels
		// even when the KV write fails.
		f.agents.put(info)
		if ok && Registered(prev) {
			f.host.ReconcileAgent(ctx, &prev, info, false)
			f.host.PlaceUnplaced(ctx, info)
		}
		f.refreshOnline()
	}
	f.assign.Unlock()
	// Compare-and-set (agentwrite.go), also when memory had nothing to
	// change: another replica's record may.
	w, err := f.store.writeAgentFrom(ctx, id, prev, rev, ok, enroll)
	if err != nil {
		return fmt.Errorf("store agent %s (enrolled) in ax_agents: %w", id, err)
	}
	if w.written {
		f.assign.Lock()
		f.agents.putRev(w.info, w.rev)
		f.assign.Unlock()
	}
	return nil
}

// LabelAgent changes agent id's labels as ch says and places it again at
// once (Host.ReconcileAgent, Host.PlaceUnplaced): group jobs of mode all
// gain or lose it, PENDING runs waiting for a member of its new groups
// are sent to it, and a mode-any job whose group it left is unassigned
// from it, its lease moving to a member. The agent must be known
// (enrolled or registered: ErrNotFound) and not revoked (ErrConflict);
// labels that are not valid are a *protocol.FieldError. The change is
// applied to the agent's record in ax_agents with compare-and-set, so
// that a write of another replica in between (a registration, a
// heartbeat, another label change) is kept. It works on the controller's
// context: a cancelled request must not stop the placement half-way. It
// is LabelAgent of a ready controller, id and ch checked.
func (f *Fleet) LabelAgent(id string, ch protocol.LabelChange) (protocol.AgentInfo, error) {
	ctx := f.ctx
	defer f.locks.lock(id)()
	// KV first: a change that is not stored is not made.
	w, err := f.store.writeAgent(ctx, id, func(cur protocol.AgentInfo, exists bool) (protocol.AgentInfo, bool, error) {
		if !exists {
			return cur, false, fmt.Errorf("label agent %s: %w: it has neither been enrolled nor registered", id, ErrNotFound)
		}
		if cur.Revoked {
			return cur, false, fmt.Errorf("label agent %s: %w: it is revoked", id, ErrConflict)
		}
		info := cur
		info.Labels, info.LabelsFrom = ch.Apply(cur.Labels), protocol.LabelsFromOperator
		if err := protocol.ValidateLabels("set", info.Labels); err != nil {
			return cur, false, err // a *protocol.FieldError
		}
		return info, true, nil
	})
	if err != nil {
		return protocol.AgentInfo{}, err
	}
	prev, info := w.prev, w.info
	f.assign.Lock()
	defer f.assign.Unlock()
	f.agents.putRev(info, w.rev)
	if Registered(prev) {
		f.host.ReconcileAgent(ctx, &prev, info, false)
		f.host.PlaceUnplaced(ctx, info)
	}
	f.log.Info("agent labels changed", "agent", id, "labels", info.Labels, "before", prev.Labels)
	info.Online = IsOnline(info, f.now(), f.cfg.AgentOfflineAfter)
	return info, nil
}
