package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// registerAgent registers id with labels on the controller's NATS server
// as an agent does (protocol level) and fails the test on a refusal.
func registerAgent(t *testing.T, e *env, id string, labels map[string]string) {
	t.Helper()
	nc, err := nats.Connect(e.ctrl.NATSURL(), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
	if err != nil {
		t.Fatalf("agent %s connect: %v", id, err)
	}
	t.Cleanup(nc.Close)
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: id, Labels: labels,
		Handlers: []string{"noop"}, Version: "test", OS: "linux", Arch: "arm64", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(protocol.RegisterSubject(id), data, 10*time.Second)
	if err != nil {
		t.Fatalf("agent %s register: %v", id, err)
	}
	if rr, err := protocol.DecodeRegisterReply(msg.Data); err != nil || rr.Error != "" {
		t.Fatalf("agent %s register: %+v, %v", id, rr, err)
	}
}

// TestAgentListPagesFiltersAndCounts: GET /v1/agents takes limit, after,
// label, online and version as the OpenAPI document says, answers a page
// with next and the counts of every matching agent, and refuses a bad
// parameter naming it.
func TestAgentListPagesFiltersAndCounts(t *testing.T) {
	e := newEnv(t)
	for i, site := range []string{"a", "b", "a"} {
		registerAgent(t, e, fmt.Sprintf("edge-%d", i), map[string]string{"site": site})
	}
	list := func(path string) apiv1.AgentPage {
		t.Helper()
		r := e.do("GET", path, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		var l apiv1.AgentPage
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, r.body)
		}
		return l
	}
	testutil.Eventually(t, 10*time.Second, "3 agents listed", func() bool {
		return list("/v1/agents?limit=1").Counts.Total == 3
	})
	l := list("/v1/agents?limit=1&label=site%3Da&online=true&version=test")
	if len(l.Agents) != 1 || l.Agents[0].Agent != "edge-0" || l.Next == "" || l.Counts.Total != 2 || l.Counts.Online != 2 {
		t.Fatalf("first page of site=a: %+v", l)
	}
	l = list("/v1/agents?limit=1&label=site%3Da&after=" + l.Next)
	if len(l.Agents) != 1 || l.Agents[0].Agent != "edge-2" || l.Next != "" {
		t.Fatalf("second page of site=a: %+v", l)
	}
	if l = list("/v1/agents?online=false"); len(l.Agents) != 0 || l.Counts.Total != 0 {
		t.Fatalf("offline agents: %+v", l)
	}
	for _, tc := range []struct{ query, field string }{
		{"online=maybe", "online"},
		{"label=site", "label"},
		{"limit=0", "limit"},
		{"version=" + strings.Repeat("v", 65), "version"},
	} {
		r := e.do("GET", "/v1/agents?"+tc.query, nil)
		if ae := r.apiErr(t); r.status != http.StatusBadRequest || ae.Field != tc.field {
			t.Errorf("GET /v1/agents?%s: %d %s; want 400 on field %q", tc.query, r.status, r.body, tc.field)
		}
	}
}
