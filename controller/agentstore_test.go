package controller

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// Two replicas: heartbeats answered by either never overwrite a label
// change just written by the other (compare-and-set on the revision of the
// agent's record; the heartbeat carries only its liveness over).
func TestHeartbeatKeepsLabelWrittenByOtherReplica(t *testing.T) {
	srv := natstest.Start(t)
	cfg := func(node string) Config {
		c := replicaConfig(t, srv.URL(), node, 2*time.Second)
		c.AgentOfflineAfter = c.HeartbeatInterval // livenessRefresh 0: every heartbeat writes
		return c
	}
	a := startController(t, cfg("ctl-a"))
	startController(t, cfg("ctl-b"))
	ag := newTestAgent(t, a.NATSURL(), "edge-1", map[string]string{"site": "x"}).start()
	ctx := tctx(t)
	eventually(t, 10*time.Second, "ctl-a knows edge-1", func() bool {
		info, ok := a.agents.Get("edge-1")
		return ok && fleet.Registered(info)
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // heartbeats, answered by either replica (queue group)
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ag.heartbeat()
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	stored := func() protocol.AgentInfo { return storedAgent(t, ctx, a, "edge-1") }
	for i := range 30 {
		want := strconv.Itoa(i)
		if _, err := a.LabelAgent(ctx, "edge-1", protocol.LabelChange{Set: map[string]string{"round": want}}); err != nil {
			t.Fatal(err)
		}
		// Some heartbeats after the change, each written to ax_agents.
		seen, writes := stored().HeartbeatAt, 0
		eventually(t, 10*time.Second, "two heartbeats written", func() bool {
			if n := stored().HeartbeatAt; n.After(seen) {
				seen, writes = n, writes+1
			}
			return writes >= 2
		})
		if got := stored().Labels["round"]; got != want {
			t.Fatalf("round %d: label round = %q in ax_agents after heartbeats, want %q", i, got, want)
		}
	}
}

// A heartbeat that changes nothing but the agent's liveness is not
// written to ax_agents (until livenessRefresh passes); the replica that
// answered still shows the new last-seen time.
func TestHeartbeatWithoutChangeIsNotWritten(t *testing.T) {
	c := newTestController(t)
	ag := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	ctx := tctx(t)
	ag.heartbeat()
	revision := func() uint64 {
		e, err := c.kv.Agents.Get(ctx, "edge-1")
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	// The first heartbeat is written (after its reply).
	eventually(t, 10*time.Second, "the first heartbeat written", func() bool { return revision() > 1 })
	rev := revision()
	before, _ := c.agents.Get("edge-1")
	for range 10 {
		if r := ag.heartbeat(); r.Error != "" {
			t.Fatal(r.Error)
		}
	}
	if got := revision(); got != rev {
		t.Fatalf("ax_agents revision %d after 10 unchanged heartbeats, want %d (not written)", got, rev)
	}
	after, _ := c.agents.Get("edge-1")
	if !after.LastSeen.After(before.LastSeen) {
		t.Fatalf("last seen %s not after %s", after.LastSeen, before.LastSeen)
	}
}

// gatedKV is ax_agents whose Updates wait while the gate is closed (a
// slow JetStream, as under a 10,000-agent load), then go to the real
// bucket.
type gatedKV struct {
	jetstream.KeyValue
	closed atomic.Bool
	open   chan struct{}
}

func (k *gatedKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.closed.Load() {
		select {
		case <-k.open:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

// A heartbeat never waits for the write of an earlier heartbeat's
// liveness to ax_agents: with the write stalled, the agent's next
// heartbeats are answered at once (they were held up behind it, up to the
// write's 5 s timeout, on the agent's heartbeat worker), and the latest
// liveness is written once the write goes through.
func TestHeartbeatNotHeldUpByLivenessWrite(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.AgentOfflineAfter = cfg.HeartbeatInterval // livenessRefresh 0: every heartbeat is due to be written
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedKV{open: make(chan struct{})}
	c.hooks.wrapKV = func(kv jetstream.KeyValue) jetstream.KeyValue {
		if kv.Bucket() != protocol.BucketAgents {
			return kv
		}
		gate.KeyValue = kv
		return gate
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	released := false
	release := func() {
		if !released {
			released = true
			close(gate.open)
		}
	}
	t.Cleanup(release)
	ag := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	stored := func() protocol.AgentInfo { return storedAgent(t, ctx, c, "edge-1") }
	ag.heartbeat()
	eventually(t, 10*time.Second, "the first heartbeat written", func() bool { return !stored().HeartbeatAt.IsZero() })

	gate.closed.Store(true)
	hb := func() (protocol.HeartbeatReply, error) {
		data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: "edge-1", SentAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := ag.nc.Request(protocol.HeartbeatSubject("edge-1"), data, 2*time.Second)
		if err != nil {
			return protocol.HeartbeatReply{}, err
		}
		return protocol.DecodeHeartbeatReply(msg.Data)
	}
	for i := range 3 {
		r, err := hb()
		if err != nil {
			t.Fatalf("heartbeat %d with the ax_agents write stalled: %v (held up behind the write)", i+2, err)
		}
		if r.Error != "" {
			t.Fatalf("heartbeat %d: %s", i+2, r.Error)
		}
	}
	last, _ := c.agents.Get("edge-1")
	release()
	eventually(t, 10*time.Second, "the last heartbeat's liveness written", func() bool {
		return !stored().LastSeen.Before(last.LastSeen)
	})
}

// storedAgent reads agent id's record as c stored it in ax_agents.
func storedAgent(t *testing.T, ctx context.Context, c *Controller, id string) protocol.AgentInfo {
	t.Helper()
	e, err := c.kv.Agents.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var info protocol.AgentInfo
	if err := json.Unmarshal(e.Value(), &info); err != nil {
		t.Fatal(err)
	}
	return info
}
