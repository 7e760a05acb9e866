package auth_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestGatewayFloodOfOneAgent: agent a's key asks the gateway for 200 of
// its own consumers as fast as it can (each valid, each named for it,
// idle up to the longest allowed). AX_CMD's consumers are the fleet's
// (max_consumers): before, every one was made. Now a's requests are
// admitted ten at once, then one every two seconds; the rest are answered
// with an error at once, and agent b still makes its consumer right after.
func TestGatewayFloodOfOneAgent(t *testing.T) {
	e := newEnv(t, "a", "b")
	a, b := e.mustConnect("a"), e.mustConnect("b")
	create := func(ac *agentConn, id, name string) string {
		t.Helper()
		cfg := map[string]any{"name": name, "filter_subject": protocol.CommandSubject(id), "ack_policy": "none",
			"deliver_policy": "all", "inactive_threshold": int64(10 * time.Minute), "num_replicas": 1}
		body, _ := json.Marshal(map[string]any{"stream_name": protocol.StreamCommands, "config": cfg})
		subj := "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + "." + name + "." + protocol.CommandSubject(id)
		msg, err := ac.nc.Request(subj, body, 10*time.Second)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return string(msg.Data)
	}
	start := time.Now()
	made, limited := 0, 0
	for i := range 200 {
		switch r := create(a, "a", fmt.Sprintf("%sflood%d", protocol.CommandConsumerPrefix("a"), i)); {
		case !strings.Contains(r, `"error"`):
			made++
		case strings.Contains(r, "too many consumer requests"):
			limited++
		default:
			t.Fatalf("unexpected answer: %s", r)
		}
	}
	// Ten at once, then one every 2 s of the flood's own duration.
	if most := 10 + int(time.Since(start)/(2*time.Second)) + 1; made < 10 || made > most {
		t.Errorf("%d of the flood's consumers made, want 10..%d", made, most)
	}
	if made+limited != 200 {
		t.Errorf("%d made and %d refused of 200", made, limited)
	}
	if r := create(b, "b", protocol.CommandConsumerPrefix("b")+"own"); strings.Contains(r, `"error"`) {
		t.Fatalf("agent b's consumer after a's flood: %s", r)
	}
	st, err := e.ajs.Stream(ctx(t), protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != made+1 {
		t.Fatalf("AX_CMD has %d consumers, want %d (a's admitted and b's)", n, made+1)
	}
}
