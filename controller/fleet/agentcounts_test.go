package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// The registry's online and known counts follow every change of a record
// as a sweep would count them.
func TestAgentCountsFollowChanges(t *testing.T) {
	r := newRegistry()
	now := time.Now()
	check := func(step string) {
		t.Helper()
		online, known := r.counts()
		wo, wk := 0, 0
		for _, e := range r.agents {
			if e.online {
				wo++
			}
			if !e.info.Revoked && Registered(e.info) {
				wk++
			}
		}
		if online != wo || known != wk {
			t.Fatalf("%s: counts online %d known %d, want %d and %d", step, online, known, wo, wk)
		}
	}
	for i := range 5 {
		r.put(protocol.AgentInfo{Agent: fmt.Sprintf("edge-%d", i), Online: true, RegisteredAt: now, LastSeen: now})
	}
	r.put(protocol.AgentInfo{Agent: "enrolled-only"})
	check("registered")
	r.put(protocol.AgentInfo{Agent: "edge-1", Online: false, RegisteredAt: now, LastSeen: now, StoppedAt: now})
	r.put(protocol.AgentInfo{Agent: "edge-2", Online: false, RegisteredAt: now, Revoked: true})
	check("stopped and revoked")
	if _, ok := r.putRev(protocol.AgentInfo{Agent: "edge-3", RegisteredAt: now}, 7); !ok {
		t.Fatal("putRev refused")
	}
	r.putRev(protocol.AgentInfo{Agent: "edge-3", Online: true, RegisteredAt: now}, 3) // older: ignored
	check("from KV")
	r.sweep(now.Add(time.Hour), time.Minute)
	check("after a sweep")
	if online, known := r.counts(); online != 0 || known != 4 {
		t.Fatalf("after the sweep: online %d known %d, want 0 and 4", online, known)
	}
}
