package fleet

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestRegistrationFloodOfOneAgent: one agent's key publishes 2,000
// registrations as fast as it can, then 20 other agents register once
// each. The flood takes one place in the queue at a time and one
// admission a second: every other agent is registered at its first try
// (before, the flood filled the queue and they were told "busy"), and the
// flood's surplus is answered at once with a RetryAfter and counted as
// refused{reason="repeat"}.
func TestRegistrationFloodOfOneAgent(t *testing.T) {
	e := testEnv("ctl-a")
	e.Config.UnboundedAgentRates = false // the production bounds
	c := startFleet(t, natstest.Start(t).URL(), e)
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const flood, others = 2000, 20
	var mu sync.Mutex
	ok := map[string]int{}
	refused := map[string]int{}
	var minRetry time.Duration
	sub, err := nc.Subscribe(protocol.InboxPrefix("*")+".r", func(m *nats.Msg) {
		r, err := protocol.DecodeRegisterReply(m.Data)
		if err != nil {
			t.Errorf("reply: %v", err)
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(m.Subject, protocol.InboxPrefix("")), ".r")
		mu.Lock()
		defer mu.Unlock()
		if r.Error == "" {
			ok[id]++
			return
		}
		refused[id]++
		if minRetry == 0 || r.RetryAfter.D() < minRetry {
			minRetry = r.RetryAfter.D()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	start := time.Now()
	for range flood {
		sendRegister(t, nc, "bad-1", protocol.InboxPrefix("bad-1")+".r")
	}
	for i := range others {
		id := fmt.Sprintf("edge-%d", i)
		sendRegister(t, nc, id, protocol.InboxPrefix(id)+".r")
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := time.Since(start)
	eventually(t, 30*time.Second, "every request answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range ok {
			n += v
		}
		for _, v := range refused {
			n += v
		}
		return n == flood+others
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range others {
		if id := fmt.Sprintf("edge-%d", i); ok[id] != 1 {
			t.Errorf("agent %s: %d registered, %d refused; want registered at its first try", id, ok[id], refused[id])
		}
	}
	// One admission a second: the flood, sent in `sent`, gets 1 + sent/1s.
	if most := 1 + int(sent/registerMinInterval); ok["bad-1"] < 1 || ok["bad-1"] > most {
		t.Errorf("flooding agent registered %d times in %s, want 1..%d", ok["bad-1"], sent, most)
	}
	if minRetry < registerBusyMin {
		t.Errorf("a refused registration was told to retry after %s, want at least %s", minRetry, registerBusyMin)
	}
	got := testutil.MetricValue(t, c.m.agentRefused.WithLabelValues(endpointRegister, refuseRepeat))
	if int(got) != refused["bad-1"] || refused["bad-1"] < flood-ok["bad-1"]-registerQueue {
		t.Errorf("refused{repeat} = %v, the flooding agent refused %d times", got, refused["bad-1"])
	}
}

// TestHeartbeatFloodOfOneAgent: one registered agent's key publishes
// 5,000 heartbeats as fast as it can while its worker is held (here by
// the agent's own lock, as behind a write of its record), then 20 other
// agents on other workers send one heartbeat each. The flood has two
// heartbeats waiting at a time and five a heartbeat interval, so the
// others' are answered while the flood's worker is still held. Before,
// the flood filled its worker's queue, then the subscription that feeds
// every worker waited for room: no agent's heartbeat was answered until
// the flood's worker was free. The flood's surplus is dropped and counted
// as refused{reason="repeat"}, each answered with an error at once.
func TestHeartbeatFloodOfOneAgent(t *testing.T) {
	e := testEnv("ctl-a")
	e.Config.UnboundedAgentRates = false // the production bounds
	c := startFleet(t, natstest.Start(t).URL(), e)
	hash := func(id string) uint32 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		return h.Sum32()
	}
	bad := newTestAgent(t, c.url, "bad-1", nil).start()
	var others []*testAgent
	for i := 0; len(others) < 20; i++ {
		id := fmt.Sprintf("edge-%d", i)
		if hash(id)%heartbeatWorkers != hash("bad-1")%heartbeatWorkers && hash(id)%agentLockStripes != hash("bad-1")%agentLockStripes {
			others = append(others, newTestAgent(t, c.url, id, nil).start())
		}
	}
	const flood = 5000
	var answered, refusedReplies atomic.Int64
	sub, err := bad.nc.Subscribe(protocol.InboxPrefix("bad-1")+".hb", func(m *nats.Msg) {
		if r, err := protocol.DecodeHeartbeatReply(m.Data); err == nil && r.Error != "" {
			refusedReplies.Add(1)
			return
		}
		answered.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	unlock := c.locks.lock("bad-1")
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: "bad-1", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for range flood {
		if err := bad.nc.PublishRequest(protocol.HeartbeatSubject("bad-1"), protocol.InboxPrefix("bad-1")+".hb", data); err != nil {
			t.Fatal(err)
		}
	}
	if err := bad.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, a := range others { // heartbeat() fails the test after 10s without a reply
		if r := a.heartbeat(); r.Error != "" {
			t.Fatalf("agent %s: heartbeat refused: %s", a.id, r.Error)
		}
	}
	locked = false
	unlock()
	eventually(t, 20*time.Second, "every heartbeat of the flood answered or refused", func() bool {
		refused := testutil.MetricValue(t, c.m.agentRefused.WithLabelValues(endpointHeartbeat, refuseRepeat))
		return int64(refused)+answered.Load() == flood && refusedReplies.Load() == int64(refused)
	})
	if n := answered.Load(); n > heartbeatWaiting+heartbeatBurst {
		t.Errorf("the flooding agent got %d heartbeats answered, want at most %d", n, heartbeatWaiting+heartbeatBurst)
	}
}
