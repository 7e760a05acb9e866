package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// The fleet's tests drive a fleet as the controller does (Attach,
// LoadAgents, StartResponders, the liveness and digest loops) on a NATS
// server of the test's, with a host that does nothing (nopHost): what
// they test is the fleet's, not the placement behind Host.

// testHeartbeatInterval is the controller's default heartbeat interval
// (controller.DefaultHeartbeatInterval); agents count as offline after
// three of them, as by default.
const testHeartbeatInterval = 5 * time.Second

// nopHost is a Host with nothing to place, no commands and no leases
// (every lease claimed is lost).
type nopHost struct{}

func (nopHost) ReconcileAgent(context.Context, *protocol.AgentInfo, protocol.AgentInfo, bool) {}

func (nopHost) PlaceUnplaced(context.Context, protocol.AgentInfo) {}

func (nopHost) LastCommandSeq(context.Context, string) (uint64, error) { return 0, nil }

func (nopHost) ResendRuns(context.Context, string, uint64) {}

func (nopHost) RenewLeases(_ context.Context, _ protocol.AgentInfo, claims []protocol.HeldLease) ([]protocol.Lease, []protocol.HeldLease) {
	return nil, claims
}

func (nopHost) ReleaseLeases(context.Context, string, []protocol.HeldLease) {}

// testEnv returns the Env of a test replica named node: the controller's
// default heartbeat interval and offline-after, the real clock, metrics
// of its own. startFleet fills in the runners and the assign lock.
func testEnv(node string) Env {
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("AX_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	clk := clock.Real{}
	return Env{
		Config: Config{Node: node, Shards: protocol.DefaultShards, HeartbeatInterval: testHeartbeatInterval,
			AgentOfflineAfter: 3 * testHeartbeatInterval, UnboundedAgentRates: true},
		Log: log,
		Metrics: Metrics{
			AgentsOnline:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_agents_online"}),
			AgentsKnown:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_agents_known"}),
			LabelsIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_agent_labels_ignored_total"}),
			StoreResets:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_agent_store_resets_total"}),
			AgentRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_agent_requests_refused_total"},
				[]string{"endpoint", "reason"}),
			AgentStats:  func(string, protocol.Stats) {},
			ForgetAgent: func(string) {},
		},
		Clock:    clk,
		Now:      func() time.Time { return clk.Now().UTC().Round(0) },
		Mono:     clk.Now,
		Instance: nuid.Next(),
	}
}

// testFleet is one replica's fleet started on a NATS server, stopped when
// the test ends.
type testFleet struct {
	*Fleet
	url      string
	assignMu *sync.Mutex // Env.Assign: the controller's assignMu
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	nc       *nats.Conn
	subs     []*nats.Subscription
	once     sync.Once
}

// startFleet starts the fleet of e on the server at url as the controller
// starts it (the streams and buckets ensured first).
func startFleet(t testing.TB, url string, e Env) *testFleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tf := &testFleet{url: url, assignMu: &sync.Mutex{}, cancel: cancel}
	e.Assign = tf.assignMu
	e.GoRun = func(fn func(context.Context)) {
		tf.wg.Add(1)
		go func() {
			defer tf.wg.Done()
			fn(ctx)
		}()
	}
	e.Every = func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error) {
		tm := e.Clock.NewTimer(first)
		defer tm.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tm.C():
			}
			if err := step(ctx); err != nil && ctx.Err() == nil {
				e.Log.Warn(what, "err", err)
			}
			tm.Reset(interval)
		}
	}
	e.Follow = func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error {
		return kvfollow.Follow(ctx, w, apply, 1, e.GoRun)
	}
	tf.Fleet = New(e, nopHost{})
	t.Cleanup(tf.close)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	tf.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sctx := testutil.Context(t, 60*time.Second)
	kv, err := streams.Ensure(sctx, js, streams.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tf.Attach(ctx, nc, js, kv)
	if err := tf.LoadAgents(sctx); err != nil {
		t.Fatal(err)
	}
	tf.subs, err = tf.StartResponders(kv.Agents)
	if err != nil {
		t.Fatal(err)
	}
	e.GoRun(tf.LivenessLoop)
	e.GoRun(tf.DigestLoop)
	return tf
}

// newTestFleet starts a fleet on a NATS server of its own.
func newTestFleet(t testing.TB) *testFleet {
	return startFleet(t, natstest.Start(t).URL(), testEnv("ctl-a"))
}

// close stops the fleet: its responders, goroutines and connection.
func (tf *testFleet) close() {
	tf.once.Do(func() {
		for _, s := range tf.subs {
			_ = s.Unsubscribe()
		}
		tf.cancel()
		tf.wg.Wait()
		if tf.nc != nil {
			tf.nc.Close()
		}
	})
}

func tctx(t testing.TB) context.Context { return testutil.Context(t, 60*time.Second) }

// eventually polls cond every few milliseconds until it holds or the
// deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

// storedAgent reads agent id's record as f stored it in ax_agents.
func storedAgent(t *testing.T, ctx context.Context, f *testFleet, id string) protocol.AgentInfo {
	t.Helper()
	e, err := f.kv.Agents.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var info protocol.AgentInfo
	if err := json.Unmarshal(e.Value(), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// testAgent is a test double of ax-agent's registration and heartbeats
// (replies to its own inbox, as the responders require).
type testAgent struct {
	t      testing.TB
	id     string
	labels map[string]string
	nc     *nats.Conn
}

// newTestAgent connects a test agent, closed when the test ends.
func newTestAgent(t testing.TB, url, id string, labels map[string]string) *testAgent {
	t.Helper()
	nc, err := nats.Connect(url, nats.CustomInboxPrefix(protocol.InboxPrefix(id)), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("agent %s connect: %v", id, err)
	}
	t.Cleanup(nc.Close)
	return &testAgent{t: t, id: id, labels: labels, nc: nc}
}

// start registers the agent.
func (a *testAgent) start() *testAgent {
	a.register()
	return a
}

// register sends a registration and checks the reply.
func (a *testAgent) register() protocol.RegisterReply {
	a.t.Helper()
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: a.id, Labels: a.labels,
		Handlers: []string{"noop"}, Version: "test", OS: "linux", Arch: "arm64", SentAt: time.Now()})
	if err != nil {
		a.t.Fatal(err)
	}
	msg, err := a.nc.Request(protocol.RegisterSubject(a.id), data, 10*time.Second)
	if err != nil {
		a.t.Fatalf("agent %s register: %v", a.id, err)
	}
	rr, err := protocol.DecodeRegisterReply(msg.Data)
	if err != nil {
		a.t.Fatalf("agent %s register: %v", a.id, err)
	}
	if rr.Error != "" {
		a.t.Fatalf("agent %s register: %v", a.id, fmt.Errorf("refused: %s", rr.Error))
	}
	return rr
}

// heartbeat sends a heartbeat and returns the reply.
func (a *testAgent) heartbeat() protocol.HeartbeatReply {
	a.t.Helper()
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: a.id, SentAt: time.Now()})
	if err != nil {
		a.t.Fatal(err)
	}
	msg, err := a.nc.Request(protocol.HeartbeatSubject(a.id), data, 10*time.Second)
	if err != nil {
		a.t.Fatalf("heartbeat: %v", err)
	}
	hr, err := protocol.DecodeHeartbeatReply(msg.Data)
	if err != nil {
		a.t.Fatalf("heartbeat reply: %v", err)
	}
	return hr
}
