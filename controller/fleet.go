package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// The fleet: the agents' registrations, heartbeats and liveness, the
// registry of agents that mirrors ax_agents, enrollment and revocation,
// labels and the agents list (agents.go, agentstore.go, agentwrite.go,
// agentlist.go, agentcounts.go, livedigest.go, regpool.go, hbpool.go,
// enroll.go, labels.go). It owns the registry and the writes of
// ax_agents and ax_liveness; what it needs of the rest of the controller
// (the assignments of an agent, its group leases, its commands) is
// fleetHost. The rest of the controller reads the registry
// (core.agents) to place jobs, and never writes it.

// Endpoints of ax_agent_requests_refused_total (the reasons of the
// registration pool's refusals are in regpool.go).
const (
	endpointRegister  = "register"
	endpointHeartbeat = "heartbeat"
)

// Internal reasons a registration is refused (handleRegister).
var (
	errRegisterRevoked  = errors.New("agent is revoked")
	errRegisterCommands = errors.New("read the agent's commands")
)

// fleetHost is what the fleet asks of the rest of the controller when an
// agent's record changes or it heartbeats. The methods marked "assign
// lock held" are called with fleetEnv.assign locked.
type fleetHost interface {
	// reconcileAgent adjusts the assignments of agent cur after its
	// record changed from prev (nil: new); resend sends all of them
	// again. Assign lock held.
	reconcileAgent(ctx context.Context, prev *protocol.AgentInfo, cur protocol.AgentInfo, resend bool)
	// placeUnplaced sends agent a the PENDING runs waiting for a member
	// of its groups. Assign lock held.
	placeUnplaced(ctx context.Context, a protocol.AgentInfo)
	// lastCommandSeq returns the sequence of the last command sent to
	// agent in AX_CMD (0: none).
	lastCommandSeq(ctx context.Context, agent string) (uint64, error)
	// resendRuns sends agent again the runs whose commands came after
	// sequence after (its store lost its state).
	resendRuns(ctx context.Context, agent string, after uint64)
	// renewLeases renews the group leases agent a claims in a heartbeat.
	renewLeases(ctx context.Context, a protocol.AgentInfo, claims []protocol.HeldLease) (renewed []protocol.Lease, lost []protocol.HeldLease)
	// releaseLeases hands back the group leases of a stopping agent.
	releaseLeases(ctx context.Context, agent string, claims []protocol.HeldLease)
}

// fleetConfig is the fleet's part of the controller's Config.
type fleetConfig struct {
	Node              string // names this replica's liveness digests
	DataDir           string // holds AuthDir
	Auth              string // nats.auth
	Shards            int    // told to registering agents
	HeartbeatInterval time.Duration
	AgentOfflineAfter time.Duration
}

// fleetMetrics are the controller's metrics the fleet sets.
type fleetMetrics struct {
	agentsOnline, agentsKnown  prometheus.Gauge
	labelsIgnored, storeResets prometheus.Counter
	agentRefused               *prometheus.CounterVec // by endpoint and reason
	agentStats                 func(agent string, s protocol.Stats)
	forgetAgent                func(agent string)
}

// fleetEnv is what the fleet's types share: plain dependencies given at
// construction (newFleet), and the connection given when the controller
// has it (attach).
type fleetEnv struct {
	cfg   fleetConfig
	log   *slog.Logger
	m     fleetMetrics
	clk   clock.Clock
	now   func() time.Time // the clock in UTC, as written to KV
	mono  func() time.Time // the clock lease and queue durations are measured with
	goRun func(func(context.Context))
	every func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	// follow applies a watch's entries: those present before it returns,
	// later ones on a goroutine (kvfollow.Follow).
	follow   func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error
	instance string // this controller process (in its liveness digests)
	// assign serializes assignment decisions (Controller.assignMu); the
	// fleet takes it after an agent's lock (agentwrite.go).
	assign sync.Locker
	agents *agentRegistry

	// Set by attach, read-only afterwards.
	ctx context.Context // the controller's: cancelled by Close
	kv  streams.Buckets
	nc  *nats.Conn
	js  jetstream.JetStream
}

// fleet answers the agents' registrations and heartbeats and makes the
// changes of their records (enrollment, revocation, labels). store holds
// its writes of ax_agents and ax_liveness.
type fleet struct {
	*fleetEnv
	host  fleetHost
	store *agentStore
	regs  regPool // registrations waiting for a worker (regpool.go)
	// locks serialize the read-modify-write of one agent's record
	// (registration, heartbeat, label, enrollment, revocation), so that a
	// heartbeat in flight does not store the agent back unrevoked or set
	// its gauges again (agentwrite.go). Taken before assign.
	locks agentLocks
	auth  *natsAuth // identities on the embedded server (enroll.go)
}

// agentStore writes agents' records to ax_agents (agentwrite.go), their
// liveness (agentstore.go) and this replica's liveness digests to
// ax_liveness (livedigest.go), and follows both buckets into the registry.
type agentStore struct{ *fleetEnv }

// newFleet returns the fleet of env (its registry made here), asking host
// for the rest.
func newFleet(env fleetEnv, host fleetHost) *fleet {
	env.agents = newAgentRegistry()
	e := &env
	return &fleet{fleetEnv: e, host: host, store: &agentStore{e}}
}

// attach gives the fleet the controller's context, connection and
// buckets, before it loads the agents.
func (f *fleet) attach(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, kv streams.Buckets) {
	f.ctx, f.nc, f.js, f.kv = ctx, nc, js, kv
}

// replyAllowed reports whether a registration or heartbeat on the subject
// of agent id may be answered (auth.ReplyAllowed); otherwise the request is
// dropped unprocessed, counted and logged.
func (f *fleet) replyAllowed(endpoint, id string, msg *nats.Msg) bool {
	if auth.ReplyAllowed(id, msg.Reply) {
		return true
	}
	f.m.agentRefused.WithLabelValues(endpoint, auth.DropReply).Inc()
	f.log.Warn("request dropped: its reply subject is not the agent's inbox", "subject", msg.Subject,
		"reply", fmt.Sprintf("%.64q", msg.Reply))
	return false
}
