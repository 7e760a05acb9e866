package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/admission"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// Endpoints of ax_agent_requests_refused_total (the reasons of the
// registration pool's refusals are in regpool.go).
const (
	endpointRegister  = "register"
	endpointHeartbeat = "heartbeat"
)

// Host is what the fleet asks of the rest of the controller when an
// agent's record changes or it heartbeats. The methods marked "assign
// lock held" are called with Env.Assign locked.
type Host interface {
	// ReconcileAgent adjusts the assignments of agent cur after its
	// record changed from prev (nil: new); resend sends all of them
	// again. Assign lock held.
	ReconcileAgent(ctx context.Context, prev *protocol.AgentInfo, cur protocol.AgentInfo, resend bool)
	// PlaceUnplaced sends agent a the PENDING runs waiting for a member
	// of its groups. Assign lock held.
	PlaceUnplaced(ctx context.Context, a protocol.AgentInfo)
	// LastCommandSeq returns the sequence of the last command sent to
	// agent in AX_CMD (0: none).
	LastCommandSeq(ctx context.Context, agent string) (uint64, error)
	// ResendRuns sends agent again the runs whose commands came after
	// sequence after (its store lost its state).
	ResendRuns(ctx context.Context, agent string, after uint64)
	// RenewLeases renews the group leases agent a claims in a heartbeat.
	RenewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease)
	// ReleaseLeases hands back the group leases of a stopping agent.
	ReleaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease)
}

// Config is the fleet's part of the controller's Config.
type Config struct {
	Node    string // names this replica's liveness digests
	DataDir string // holds AuthDir
	Auth    string // nats.auth: auth.ModeNKeys enables EnrollAgent and RevokeAgent
	Shards  int    // told to registering agents
	// HeartbeatInterval is told to registering agents and paces the
	// liveness loop; an agent not heard from for AgentOfflineAfter is
	// offline.
	HeartbeatInterval time.Duration
	AgentOfflineAfter time.Duration
	// UnboundedAgentRates lifts the per-agent rates of registrations and
	// heartbeats (admit.go; the bounds on what waits stay): for tests that
	// send one agent's requests back to back. Production leaves it false.
	UnboundedAgentRates bool
}

// Metrics are the controller's metrics the fleet sets.
type Metrics struct {
	AgentsOnline, AgentsKnown  prometheus.Gauge       // ax_agents_online, ax_agents_known
	LabelsIgnored, StoreResets prometheus.Counter     // ax_agent_labels_ignored_total, ax_agent_store_resets_total
	AgentRefused               *prometheus.CounterVec // ax_agent_requests_refused_total, by endpoint and reason
	// AgentStats sets the ax_agent_* gauges of agent from its heartbeat's
	// stats; ForgetAgent deletes them.
	AgentStats  func(agent string, s protocol.Stats)
	ForgetAgent func(agent string)
}

// Env is what the fleet is given at construction (New): its
// configuration, metrics and the controller's plain dependencies.
type Env struct {
	Config  Config
	Log     *slog.Logger
	Metrics Metrics
	Clock   clock.Clock
	Now     func() time.Time // the clock in UTC, as written to KV
	Mono    func() time.Time // the clock lease and queue durations are measured with
	// GoRun runs a function on a goroutine the controller waits for at
	// Close, with the controller's context.
	GoRun func(func(context.Context))
	// Every runs step first after first, then every interval, until ctx
	// ends, logging its errors as what.
	Every func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	// Follow applies a watch's entries: those present before it returns,
	// later ones on a goroutine (kvfollow.Follow).
	Follow   func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error
	Instance string // this controller process (in its liveness digests)
	// Assign serializes assignment decisions (the controller's assignMu);
	// the fleet takes it after an agent's lock (agentwrite.go).
	Assign sync.Locker
}

// metrics are Metrics as the fleet's code reads them.
type metrics struct {
	agentsOnline, agentsKnown  prometheus.Gauge
	labelsIgnored, storeResets prometheus.Counter
	agentRefused               *prometheus.CounterVec
	agentStats                 func(agent string, s protocol.Stats)
	forgetAgent                func(agent string)
}

// env is what the fleet's types share: the plain dependencies of Env, the
// registry made by New, and the connection given when the controller
// has it (Attach).
type env struct {
	cfg      Config
	log      *slog.Logger
	m        metrics
	clk      clock.Clock
	now      func() time.Time
	mono     func() time.Time
	goRun    func(func(context.Context))
	every    func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	follow   func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error
	instance string
	assign   sync.Locker
	agents   *Registry

	// Set by Attach, read-only afterwards.
	ctx context.Context // the controller's: cancelled by Close
	kv  streams.Buckets
	nc  *nats.Conn
	js  jetstream.JetStream
}

// Fleet answers the agents' registrations and heartbeats and makes the
// changes of their records (enrollment, revocation, labels); it owns the
// registry (Registry). Make one with New; the controller starts it with
// OpenAuth (before its embedded server), Attach, LoadAgents,
// StartResponders, LivenessLoop and DigestLoop. store holds its writes of
// ax_agents and ax_liveness.
type Fleet struct {
	*env
	host  Host
	store *agentStore
	regs  regPool // registrations waiting for a worker (regpool.go)
	// hbAdmitted bounds each agent's heartbeats waiting for a worker
	// (admit.go, hbpool.go).
	hbAdmitted *admission.Admissions
	// locks serialize the read-modify-write of one agent's record
	// (registration, heartbeat, label, enrollment, revocation), so that a
	// heartbeat in flight does not store the agent back unrevoked or set
	// its gauges again (agentwrite.go). Taken before assign.
	locks agentLocks
	auth  *Auth // identities on the embedded server (enroll.go)
}

// agentStore writes agents' records to ax_agents (agentwrite.go), their
// liveness (agentstore.go) and this replica's liveness digests to
// ax_liveness (livedigest.go), and follows both buckets into the registry.
type agentStore struct{ *env }

// New returns the fleet of e (its registry made here), asking host for
// the rest.
func New(e Env, host Host) *Fleet {
	m := e.Metrics
	en := &env{
		cfg: e.Config, log: e.Log, clk: e.Clock, now: e.Now, mono: e.Mono, goRun: e.GoRun, every: e.Every,
		follow: e.Follow, instance: e.Instance, assign: e.Assign, agents: newRegistry(),
		m: metrics{agentsOnline: m.AgentsOnline, agentsKnown: m.AgentsKnown, labelsIgnored: m.LabelsIgnored,
			storeResets: m.StoreResets, agentRefused: m.AgentRefused, agentStats: m.AgentStats, forgetAgent: m.ForgetAgent},
	}
	f := &Fleet{env: en, host: host, store: &agentStore{en}}
	reg := admission.Bounds{Waiting: registerWaiting, Burst: 1, Every: registerMinInterval}
	hb := admission.Bounds{Waiting: heartbeatWaiting, Burst: heartbeatBurst, Every: e.Config.HeartbeatInterval / heartbeatBurst}
	if e.Config.UnboundedAgentRates {
		reg.Every, hb.Every = 0, 0
	}
	f.regs.admitted, f.hbAdmitted = admission.New(reg), admission.New(hb)
	return f
}

// Registry returns the fleet's registry of agents, which the rest of the
// controller reads (to place jobs) and never writes.
func (f *Fleet) Registry() *Registry { return f.agents }

// Attach gives the fleet the controller's context, connection and
// buckets, before it loads the agents (LoadAgents).
func (f *Fleet) Attach(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, kv streams.Buckets) {
	f.ctx, f.nc, f.js, f.kv = ctx, nc, js, kv
}

// LoadAgents reads ax_agents and the other replicas' liveness digests into
// the registry before it returns, then keeps following both buckets
// (agents.go, livedigest.go). Attach comes first.
func (f *Fleet) LoadAgents(ctx context.Context) error { return f.store.followAgents(ctx) }

// DigestLoop writes this replica's liveness digest to ax_liveness until
// ctx ends (livedigest.go); it returns at once when every heartbeat is
// written to ax_agents.
func (f *Fleet) DigestLoop(ctx context.Context) { f.store.digestLoop(ctx) }

// replyAllowed reports whether a registration or heartbeat on the subject
// of agent id may be answered (auth.ReplyAllowed); otherwise the request is
// dropped unprocessed, counted and logged.
func (f *Fleet) replyAllowed(endpoint, id string, msg *nats.Msg) bool {
	if auth.ReplyAllowed(id, msg.Reply) {
		return true
	}
	f.m.agentRefused.WithLabelValues(endpoint, auth.DropReply).Inc()
	f.log.Warn("request dropped: its reply subject is not the agent's inbox", "subject", msg.Subject,
		"reply", fmt.Sprintf("%.64q", msg.Reply))
	return false
}
