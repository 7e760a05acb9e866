package fleet

import (
	"fmt"
	"strings"
	"sync"
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
	e.Config.RegisterMinInterval = 0 // the default: 1s
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
