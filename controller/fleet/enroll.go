package fleet

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// AuthDir is the directory under Config.DataDir that holds the
// controller's NATS seed and the enrolled-agent registry (nats.auth:
// nkeys), mode 0700.
const AuthDir = "auth"

// Auth holds the identities of the embedded server when nats.auth is
// nkeys (Fleet.Auth); a nil *Auth (nats.auth none) configures nothing and
// has no credentials. mu serializes enrollments and revocations with the
// server reload that applies them.
type Auth struct {
	mu      sync.Mutex
	reg     *auth.Registry
	ctlPub  string
	connOpt nats.Option
	srv     *server.Server
	opts    *server.Options
	// reload runs a reload apart from KV reads (the controller's
	// reloadGuard); nil runs it as it is.
	reload func(apply func() error) error
}

// OpenAuth loads (or creates) the controller's identity and the registry
// (auth.Open) when nats.auth is nkeys; Auth stays nil otherwise. reload
// runs the server reloads that apply enrollments, apart from KV reads
// (the controller's reloadGuard). It comes before the embedded server
// starts (Auth.Configure).
func (f *Fleet) OpenAuth(reload func(apply func() error) error) error {
	if f.cfg.Auth != auth.ModeNKeys {
		return nil
	}
	pub, seedPath, reg, err := auth.Open(filepath.Join(f.cfg.DataDir, AuthDir))
	if err != nil {
		return err
	}
	opt, err := nats.NkeyOptionFromSeed(seedPath)
	if err != nil {
		return fmt.Errorf("controller identity: %w", err)
	}
	f.auth = &Auth{reg: reg, ctlPub: pub, connOpt: opt, reload: reload}
	f.log.Info("nats auth: nkeys, one account per agent", "controller_key", pub, "enrolled_agents", len(reg.List()))
	return nil
}

// Auth returns the identities of the embedded server, nil without
// nats.auth: nkeys (or before OpenAuth).
func (f *Fleet) Auth() *Auth { return f.auth }

// Configure sets the accounts and users of the embedded server's options
// (nothing without nats.auth: nkeys).
func (a *Auth) Configure(o *server.Options) error {
	if a == nil {
		return nil
	}
	return auth.Configure(o, a.ctlPub, a.reg.List())
}

// SetServer gives the running embedded server and its options, which
// enrollments and revocations reload (nothing without nats.auth: nkeys).
func (a *Auth) SetServer(srv *server.Server, opts *server.Options) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.srv, a.opts = srv, opts
	a.mu.Unlock()
}

// ConnectOptions are the controller's own credentials (none without auth).
func (a *Auth) ConnectOptions() []nats.Option {
	if a == nil {
		return nil
	}
	return []nats.Option{a.connOpt}
}

// applyLocked reloads the server's accounts and users from the registry;
// a.mu is held.
func (a *Auth) applyLocked() error {
	apply := func() error { return auth.Apply(a.srv, a.opts, a.ctlPub, a.reg.List()) }
	if a.reload == nil {
		return apply()
	}
	return a.reload(apply)
}

// authOn returns the auth state, or an error when the controller runs
// without nats.auth: nkeys.
func (f *Fleet) authOn(op string) (*Auth, error) {
	if f.auth == nil {
		return nil, fmt.Errorf("%s: %w: nats.auth is %q; agent identities need nats.auth: nkeys on the embedded server",
			op, ErrConflict, f.cfg.Auth)
	}
	return f.auth, nil
}

// EnrollAgent issues agent id its NATS identity (an NKey user in an
// account of its own that reaches only the agent's own subjects, see
// auth.AgentImports) and applies it to the running server. The returned
// seed exists nowhere else: the controller keeps only the public key.
// Enrolling an enrolled id fails with ErrExists unless req.Rotate is set,
// which replaces the key and closes the connection of the old one.
// Enrolling a revoked agent again clears the revoked mark of its
// ax_agents record, so that it can register. req.Labels become the
// agent's labels (kept by the controller; the agent's registration cannot
// change them, see labels.go); a request without labels keeps the labels
// the controller has. Without nats.auth: nkeys it fails with ErrConflict.
// It is EnrollAgent of a ready controller.
func (f *Fleet) EnrollAgent(id string, req auth.EnrollRequest) (auth.Enrollment, error) {
	a, err := f.authOn("enroll " + id)
	if err != nil {
		return auth.Enrollment{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, had := a.reg.Get(id)
	en, err := a.reg.Enroll(id, req, f.clk.Now())
	if err != nil {
		return auth.Enrollment{}, authErr("enroll", err)
	}
	if err := a.applyLocked(); err != nil {
		var rb error
		if had {
			rb = a.reg.Restore(prev)
		} else {
			rb = a.reg.Remove(id, en.PublicKey)
		}
		return auth.Enrollment{}, errors.Join(fmt.Errorf("enroll %s: %w", id, err), rb)
	}
	f.log.Info("agent enrolled", "agent", id, "public_key", en.PublicKey, "rotated", had, "labels", req.Labels)
	if err := f.setEnrolled(id, req); err != nil {
		// The identity is issued and the record is set in memory: this
		// controller uses the enrollment's labels and lets the agent register.
		f.log.Warn("agent enrolled, but its ax_agents record was not written", "agent", id, "err", err)
	}
	return en, nil
}

// RevokeAgent removes agent id's NATS identity: its live connection is
// closed and it can no longer connect. Its ax_agents record is marked
// revoked (registrations and heartbeats refused, group jobs moved to other
// members, not counted in ax_agents_known, its ax_agent_* gauges
// deleted). It returns what was revoked; ErrNotFound when id is not
// enrolled, ErrConflict without nats.auth: nkeys. It is RevokeAgent of a
// ready controller.
func (f *Fleet) RevokeAgent(id string) (auth.Agent, error) {
	a, err := f.authOn("revoke " + id)
	if err != nil {
		return auth.Agent{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, err := a.reg.Revoke(id)
	if err != nil {
		return auth.Agent{}, authErr("revoke", err)
	}
	if err := a.applyLocked(); err != nil {
		return auth.Agent{}, errors.Join(fmt.Errorf("revoke %s: %w", id, err), a.reg.Restore(prev))
	}
	f.log.Info("agent revoked", "agent", id, "public_key", prev.PublicKey)
	if err := f.setRevoked(id, true); err != nil {
		// The identity is gone and this controller refuses the agent; only
		// the KV record (read at the next start) missed the mark.
		f.log.Warn("agent revoked, but its ax_agents record was not marked", "agent", id, "err", err)
	}
	return prev, nil
}

// authErr maps the auth package's sentinels to the fleet's.
func authErr(op string, err error) error {
	switch {
	case errors.Is(err, auth.ErrAlreadyEnrolled):
		return fmt.Errorf("%s: %w: %w", op, ErrExists, err)
	case errors.Is(err, auth.ErrNotEnrolled):
		return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// setRevoked marks agent id revoked (or, after a new enrollment, no longer
// revoked) in ax_agents and moves its group jobs accordingly. A revoked
// agent's registrations and heartbeats are refused, it no longer counts in
// ax_agents_known, and its per-agent gauges are deleted. An agent that
// never registered has no record and nothing to mark. It works on the
// controller's context, not a request's: a cancelled request must not stop
// the reassignment half-way.
func (f *Fleet) setRevoked(id string, revoked bool) error {
	ctx := f.ctx
	defer f.locks.lock(id)()
	f.assign.Lock()
	if revoked {
		f.m.forgetAgent(id)
	}
	prev, rev, _, ok := f.agents.getRev(id)
	if ok && prev.Revoked != revoked {
		info := cloneAgent(prev)
		info.Revoked = revoked
		info.Online = info.Online && !revoked
		// Memory first: the refusal holds on this controller even when
		// the KV write fails.
		f.agents.put(info)
		f.host.ReconcileAgent(ctx, &prev, info, false)
		f.refreshOnline()
	}
	f.assign.Unlock()
	if !ok {
		return nil
	}
	// Compare-and-set (agentwrite.go): a registration or heartbeat another
	// replica wrote meanwhile keeps its fields, and gets the mark.
	w, err := f.store.writeAgentFrom(ctx, id, prev, rev, ok, func(cur protocol.AgentInfo, exists bool) (protocol.AgentInfo, bool, error) {
		if !exists || cur.Revoked == revoked {
			return cur, false, nil
		}
		cur.Revoked = revoked
		cur.Online = cur.Online && !revoked
		return cur, true, nil
	})
	if err != nil {
		return fmt.Errorf("store agent %s (revoked %t) in ax_agents: %w", id, revoked, err)
	}
	if w.written {
		f.assign.Lock()
		f.agents.putRev(w.info, w.rev)
		f.assign.Unlock()
	}
	return nil
}
