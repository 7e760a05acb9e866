package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

	stallStore(t, a)

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
