package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/pkg/protocol"
)

// The registration and heartbeat responders are subscribed on a connection
// of their own, not on the one that carries the controller's KV writes, the
// ax_agents watch, reports and commands; a registration and a heartbeat are
// answered through it.
func TestRespondersOnTheirOwnConnection(t *testing.T) {
	c := newTestController(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil)
	a.register()
	if r := a.heartbeat(); r.Error != "" {
		t.Fatalf("heartbeat: %s", r.Error)
	}
	cz, err := c.srv.Connz(&server.ConnzOptions{Subscriptions: true})
	if err != nil {
		t.Fatal(err)
	}
	responders := map[string]bool{protocol.SubjectRegisterAll: true, protocol.SubjectHeartbeatAll: true}
	found := 0
	for _, ci := range cz.Conns {
		mine := strings.HasPrefix(ci.Name, "ax-controller-")
		for _, s := range ci.Subs {
			if !responders[s] {
				continue
			}
			switch {
			case !mine:
				continue
			case !strings.HasSuffix(ci.Name, "-responders"):
				t.Errorf("%s subscribed on the controller's connection %q", s, ci.Name)
			case slices.Contains(ci.Subs, "$KV.ax_agents.>"):
				t.Errorf("the responders' connection %q also carries the ax_agents watch", ci.Name)
			default:
				found++
			}
		}
	}
	if found != len(responders) {
		t.Fatalf("responder subscriptions on their own connection: %d, want %d", found, len(responders))
	}
}
