package controller

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// A registration writes its record to ax_agents before it takes the
// assignment lock: a job change holding that lock does not hold up the
// registrations' KV writes (they were written under it, one at a time).
func TestRegistrationStoresWithoutAssignLock(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: "edge-1", Handlers: []string{"noop"},
		Version: "v2", OS: "linux", Arch: "arm64", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	c.assignMu.Lock()
	locked := true
	defer func() {
		if locked {
			c.assignMu.Unlock()
		}
	}()
	inbox := protocol.InboxPrefix("edge-1") + ".r" // an agent's replies go to its own inbox
	replies := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(protocol.RegisterSubject("edge-1"), inbox, data); err != nil {
		t.Fatal(err)
	}
	stored := func() string {
		e, err := c.kv.Agents.Get(ctx, "edge-1")
		if err != nil {
			return ""
		}
		var a protocol.AgentInfo
		if json.Unmarshal(e.Value(), &a) != nil {
			return ""
		}
		return a.Version
	}
	eventually(t, 20*time.Second, "the registration stored while assignMu is held", func() bool { return stored() == "v2" })
	c.assignMu.Unlock()
	locked = false
	select {
	case m := <-replies:
		if rr, err := protocol.DecodeRegisterReply(m.Data); err != nil || rr.Error != "" {
			t.Fatalf("registration reply: %+v, %v", rr, err)
		}
	case <-ctx.Done():
		t.Fatal("no registration reply")
	}
}

// BenchmarkRegisterWithJobs: a new agent's registration (its assignments
// sent) while the controller holds N periodic jobs pinned to other agents;
// its cost must not grow with N
// (go test -run '^$' -bench RegisterWithJobs ./controller/).
func BenchmarkRegisterWithJobs(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			c := newTestController(b)
			for i := range n {
				c.jobs.Put(protocol.Job{ID: fmt.Sprintf("job-%06d", i), Schedule: schedule.Spec{Every: "1h"},
					Target: protocol.Target{Agent: fmt.Sprintf("other-%03d", i%500)}}, uint64(i+1))
			}
			benchRegistrations(b, c)
		})
	}
}

// BenchmarkRegisterInFleet: a registration of a new agent while 10,000
// agents are online; its cost must not grow with the fleet
// (go test -run '^$' -bench RegisterInFleet ./controller/).
func BenchmarkRegisterInFleet(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			c := newTestController(b)
			putAgents(b, c, onlineAgents("fleet", n, c.now()))
			benchRegistrations(b, c)
		})
	}
}

// benchRegistrations registers a new agent per benchmark op with c, over
// plain NATS, and checks each reply.
func benchRegistrations(b *testing.B, c *Controller) {
	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	replies := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(protocol.InboxPrefix("*")+".r", replies)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("edge-%d", i)
		data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: id, Handlers: []string{"noop"},
			Version: "test", OS: "linux", Arch: "arm64", SentAt: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		if err := nc.PublishRequest(protocol.RegisterSubject(id), protocol.InboxPrefix(id)+".r", data); err != nil {
			b.Fatal(err)
		}
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-time.After(10 * time.Second):
			b.Fatal("no registration reply")
		}
		if rr, err := protocol.DecodeRegisterReply(m.Data); err != nil || rr.Error != "" {
			b.Fatalf("%+v %v", rr, err)
		}
	}
}
