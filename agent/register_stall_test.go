package agent

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/agent/store"
)

// TestRegisterNotBehindStalledStore: the server drops the agent's
// connection while the store's writer is stalled (a write that does not
// finish). The agent reconnects, registers and heartbeats again: a
// registration does not wait for a store write.
func TestRegisterNotBehindStalledStore(t *testing.T) {
	c := startCtl(t)
	c.consumer.Stop()
	a := startAgent(t, testConfig(t, "edge-rs", c.srv.URL()))
	regs := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.regs }
	waitFor(t, 10*time.Second, "registered", func() bool { return regs() > 0 })

	release, stalled := make(chan struct{}), make(chan struct{})
	var entered, released sync.Once
	unstall := func() { released.Do(func() { close(release) }) }
	a.st.Submit(func(*store.Tx) error { entered.Do(func() { close(stalled) }); <-release; return nil }, nil)
	t.Cleanup(unstall)
	<-stalled

	r0 := regs()
	connz, err := c.srv.Server().Connz(&server.ConnzOptions{})
	must(t, err)
	kicked := 0
	for _, ci := range connz.Conns {
		if strings.Contains(ci.Name, "edge-rs") {
			must(t, c.srv.Server().DisconnectClientByID(ci.Cid))
			kicked++
		}
	}
	if kicked == 0 {
		t.Fatalf("no connection of edge-rs among %d", len(connz.Conns))
	}
	waitFor(t, 10*time.Second, "a registration after the reconnect", func() bool { return regs() > r0 })
	h0, _ := c.heartbeats()
	waitFor(t, 10*time.Second, "heartbeats after the registration, with the store's writer still stalled", func() bool {
		h, _ := c.heartbeats()
		return h >= h0+2
	})
}
