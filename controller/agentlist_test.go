package controller

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

func TestListAgentPageFiltersPagesAndCounts(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	for i := range 5 {
		site := "a"
		if i%2 == 1 {
			site = "b"
		}
		newTestAgent(t, c.NATSURL(), fmt.Sprintf("edge-%d", i), map[string]string{"site": site}).start().heartbeat()
	}
	eventually(t, 10*time.Second, "5 agents known", func() bool {
		p, err := c.ListAgentPage(ctx, AgentFilter{Limit: 1})
		return err == nil && p.Counts.Total == 5
	})
	var ids []string
	after := ""
	for {
		p, err := c.ListAgentPage(ctx, AgentFilter{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Agents) > 2 {
			t.Fatalf("page of %d agents, limit 2", len(p.Agents))
		}
		for _, a := range p.Agents {
			ids = append(ids, a.Agent)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if len(ids) != 5 || !sort.StringsAreSorted(ids) {
		t.Fatalf("pages gave %v, want the 5 agents in id order", ids)
	}
	p, err := c.ListAgentPage(ctx, AgentFilter{Label: "site=b"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Counts.Total != 2 || len(p.Agents) != 2 || p.Agents[0].Agent != "edge-1" || p.Agents[1].Agent != "edge-3" {
		t.Fatalf("site=b: %+v", p)
	}
	off := false
	if p, err = c.ListAgentPage(ctx, AgentFilter{Online: &off}); err != nil || p.Counts.Total != 0 {
		t.Fatalf("offline: %+v, %v", p.Counts, err)
	}
	if p, err = c.ListAgentPage(ctx, AgentFilter{Version: "test", Limit: 1}); err != nil || p.Counts.Online != 5 || len(p.Agents) != 1 {
		t.Fatalf("version test: %+v, %v", p.Counts, err)
	}
	if _, err := c.ListAgentPage(ctx, AgentFilter{Label: "=bad"}); err == nil {
		t.Fatal("bad selector accepted")
	}
}

// BenchmarkListAgentPage10k: one page of 100 of 10,000 agents
// (go test -run '^$' -bench ListAgentPage10k ./controller/).
func BenchmarkListAgentPage10k(b *testing.B) {
	c := newTestController(b)
	now := c.now()
	agents := make([]protocol.AgentInfo, 10_000)
	for i := range agents {
		agents[i] = protocol.AgentInfo{Agent: fmt.Sprintf("edge-%05d", i), Labels: map[string]string{"site": fmt.Sprint(i % 10)},
			Online: true, RegisteredAt: now, LastSeen: now, Version: "1.0"}
	}
	putAgents(b, c, agents)
	ctx := tctx(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		after := fmt.Sprintf("edge-%05d", (i*100)%10_000)
		if _, err := c.ListAgentPage(ctx, AgentFilter{Limit: 100, After: after}); err != nil {
			b.Fatal(err)
		}
	}
}
