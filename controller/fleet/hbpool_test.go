package fleet

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/pkg/protocol"
)

// A heartbeat that waits (here for its agent's lock, as behind a
// registration or a write to ax_agents) does not hold up the heartbeats of
// other agents: they are answered meanwhile (one subscription handled
// them one at a time).
func TestHeartbeatNotHeldUpByAnotherAgents(t *testing.T) {
	c := newTestFleet(t)
	hash := func(id string) uint32 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		return h.Sum32()
	}
	other := ""
	for i := range 100 {
		id := fmt.Sprintf("edge-%d", i+2)
		if hash(id)%heartbeatWorkers != hash("edge-1")%heartbeatWorkers && hash(id)%agentLockStripes != hash("edge-1")%agentLockStripes {
			other = id
			break
		}
	}
	slow := newTestAgent(t, c.url, "edge-1", nil).start()
	fast := newTestAgent(t, c.url, other, nil).start()
	slow.heartbeat()
	fast.heartbeat()

	unlock := c.locks.lock("edge-1")
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	data, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: "edge-1", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	replies := make(chan *nats.Msg, 1)
	sub, err := slow.nc.ChanSubscribe(protocol.InboxPrefix("edge-1")+".hb", replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := slow.nc.PublishRequest(protocol.HeartbeatSubject("edge-1"), protocol.InboxPrefix("edge-1")+".hb", data); err != nil {
		t.Fatal(err)
	}
	if err := slow.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The other agent's heartbeat is answered while edge-1's waits.
	data, err = protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: other, SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fast.nc.Request(protocol.HeartbeatSubject(other), data, 3*time.Second); err != nil {
		t.Fatalf("heartbeat of %s while edge-1's waits: %v", other, err)
	}
	unlock()
	locked = false
	select {
	case m := <-replies:
		if r, err := protocol.DecodeHeartbeatReply(m.Data); err != nil || r.Error != "" {
			t.Fatalf("edge-1 heartbeat reply: %+v %v", r, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("edge-1's heartbeat not answered after its lock was released")
	}
}
