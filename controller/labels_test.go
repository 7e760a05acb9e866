package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestEnrolledLabelsAuthoritative: an enrolled agent registering with a
// label it was not given gets neither the group's broadcast job, nor its
// runs, nor its leases; the claim is ignored, counted and answered with
// the controller's labels. `agent label` adding the label makes it a
// member at once; removing a label from the holder of a group lease moves
// the lease.
func TestEnrolledLabelsAuthoritative(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS.Auth = auth.ModeNKeys
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 5 * time.Second
	cfg.LeaseTTL = time.Second
	cfg.LeaseRenewInterval = 200 * time.Millisecond
	c := startController(t, cfg)
	ctx := tctx(t)

	h := newEnrolledAgent(t, c, "edge-h", map[string]string{"site": "vault"}).start()
	x := newEnrolledAgent(t, c, "edge-x", map[string]string{"role": "pump"})
	// edge-x claims site=vault, which it was not enrolled with.
	x.labels = map[string]string{"role": "pump", "site": "vault"}
	x.follow()
	if rr := x.register(); len(rr.Labels) != 1 || rr.Labels["role"] != "pump" {
		t.Fatalf("registration reply labels = %v, want the enrollment's role=pump", rr.Labels)
	}
	if n := testutil.MetricValue(t, c.m.labelsIgnored); n != 1 {
		t.Fatalf("%s = %v, want 1", metricLabelsIgnored, n)
	}
	if as, _ := c.ListAgents(ctx); !slices.ContainsFunc(as, func(a protocol.AgentInfo) bool {
		return a.Agent == "edge-x" && len(a.Labels) == 1 && a.LabelsFrom == protocol.LabelsFromEnrollment
	}) {
		t.Fatalf("agent ls: %+v", as)
	}

	all, err := c.CreateJob(ctx, protocol.Job{Name: "vault-all", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "site=vault", Mode: protocol.ModeAll}})
	if err != nil {
		t.Fatal(err)
	}
	// Several mode-any jobs: with edge-x a member, rendezvous would give
	// it some of them (all to edge-h by chance: 1 in 2^8).
	var anyJobs []protocol.Job
	for i := range 8 {
		j, err := c.CreateJob(ctx, protocol.Job{Name: fmt.Sprintf("vault-any-%d", i), Handler: "noop",
			Schedule: schedule.Spec{Every: "1h"}, Target: protocol.Target{Group: "site=vault"}})
		if err != nil {
			t.Fatal(err)
		}
		anyJobs = append(anyJobs, j)
	}
	holder := func(jobID string) string {
		for _, a := range []*testAgent{h, x} {
			if slices.ContainsFunc(a.commands(), assignWithEpoch(jobID, 0)) {
				return a.id
			}
		}
		return ""
	}
	eventually(t, 15*time.Second, "every group lease granted", func() bool {
		h.heartbeat()
		x.heartbeat()
		for _, j := range anyJobs {
			if holder(j.ID) == "" {
				return false
			}
		}
		return true
	})
	for _, j := range anyJobs {
		if got := holder(j.ID); got != "edge-h" {
			t.Fatalf("group lease of %s granted to %s, which is not in site=vault", j.Name, got)
		}
	}
	h.waitCommand("broadcast assign", isAssign(all.ID, 0))
	if slices.ContainsFunc(x.commands(), isAssign(all.ID, 0)) {
		t.Fatal("edge-x was assigned the broadcast job of a group it is not in")
	}
	ex, err := c.TriggerJob(ctx, all.ID)
	if err != nil || ex.Shard == nil || ex.Shard.Total != 1 || ex.Agent != "edge-h" {
		t.Fatalf("trigger with one member = %+v, %v", ex, err)
	}

	// The operator gives edge-x the label: it joins at once.
	got, err := c.LabelAgent(ctx, "edge-x", protocol.LabelChange{Set: map[string]string{"site": "vault"}})
	if err != nil || got.Labels["site"] != "vault" || got.Labels["role"] != "pump" || got.LabelsFrom != protocol.LabelsFromOperator {
		t.Fatalf("LabelAgent = %+v, %v", got, err)
	}
	x.waitCommand("broadcast assign after agent label", isAssign(all.ID, 0))
	ex, err = c.TriggerJob(ctx, all.ID)
	if err != nil || ex.Shard == nil || ex.Shard.Total != 2 {
		t.Fatalf("trigger with two members = %+v, %v", ex, err)
	}
	// The label stays when edge-x registers again with other labels.
	x.labels = nil
	if rr := x.register(); rr.Labels["site"] != "vault" {
		t.Fatalf("re-registration reply labels = %v", rr.Labels)
	}

	// edge-h leaves the group: its leases move to edge-x.
	if _, err := c.LabelAgent(ctx, "edge-h", protocol.LabelChange{Remove: []string{"site"}}); err != nil {
		t.Fatal(err)
	}
	h.waitCommand("unassign after leaving the group", hasUnassign(anyJobs[0].ID))
	eventually(t, 15*time.Second, "group leases moved to edge-x", func() bool {
		x.heartbeat()
		for _, j := range anyJobs {
			if !slices.ContainsFunc(x.commands(), assignWithEpoch(j.ID, 0)) {
				return false
			}
		}
		return true
	})

	// Errors name the cause.
	if _, err := c.LabelAgent(ctx, "nobody", protocol.LabelChange{Set: map[string]string{"a": "b"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("label unknown agent: %v", err)
	}
	var fe *protocol.FieldError
	if _, err := c.LabelAgent(ctx, "edge-x", protocol.LabelChange{}); !errors.As(err, &fe) || fe.Field != "set" {
		t.Fatalf("empty change: %v", err)
	}
	if _, err := c.RevokeAgent(ctx, "edge-h"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LabelAgent(ctx, "edge-h", protocol.LabelChange{Set: map[string]string{"a": "b"}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("label revoked agent: %v", err)
	}
}

// TestEnrollLabelsBeforeRegistration: enrollment records the labels
// before the agent ever registers (it is no group member until it does);
// a rotation without labels keeps them, one with labels replaces them.
func TestEnrollLabelsBeforeRegistration(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS.Auth = auth.ModeNKeys
	c := startController(t, cfg)
	ctx := tctx(t)
	if _, err := c.EnrollAgent(ctx, "edge-9", auth.EnrollRequest{Labels: map[string]string{"site": "a"}}); err != nil {
		t.Fatal(err)
	}
	a, ok := c.agents.Get("edge-9")
	if !ok || a.Labels["site"] != "a" || a.LabelsFrom != protocol.LabelsFromEnrollment || fleet.Registered(a) {
		t.Fatalf("record after enroll = %+v, %v", a, ok)
	}
	if n := testutil.MetricValue(t, c.m.agentsKnown); n != 0 {
		t.Fatalf("%s = %v before the agent registered", metricAgentsKnown, n)
	}
	job, err := c.CreateJob(ctx, protocol.Job{Name: "g", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "site=a", Mode: protocol.ModeAll}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TriggerJob(ctx, job.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("trigger with only an unregistered agent in the group: %v", err)
	}
	if _, err := c.EnrollAgent(ctx, "edge-9", auth.EnrollRequest{Rotate: true}); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.agents.Get("edge-9"); a.Labels["site"] != "a" {
		t.Fatalf("rotation without labels changed them: %v", a.Labels)
	}
	if _, err := c.EnrollAgent(ctx, "edge-9", auth.EnrollRequest{Rotate: true, Labels: map[string]string{"site": "b"}}); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.agents.Get("edge-9"); a.Labels["site"] != "b" || len(a.Labels) != 1 {
		t.Fatalf("rotation with labels: %v", a.Labels)
	}
}

// Two replicas change an agent's labels at the same time (different keys):
// both changes are kept in ax_agents and in both replicas' views, since
// each is a compare-and-set on the record's revision (a plain put wrote
// the record as its replica last knew it, dropping the other's change).
func TestLabelChangesOnTwoReplicasAreBothKept(t *testing.T) {
	srv := natstest.Start(t)
	a := startController(t, replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second))
	b := startController(t, replicaConfig(t, srv.URL(), "ctl-b", 2*time.Second))
	newTestAgent(t, a.NATSURL(), "edge-1", map[string]string{"site": "x"}).start()
	ctx := tctx(t)
	for _, c := range []*Controller{a, b} {
		eventually(t, 10*time.Second, "both replicas know edge-1", func() bool {
			info, ok := c.agents.Get("edge-1")
			return ok && fleet.Registered(info)
		})
	}
	stored := func() map[string]string {
		e, err := a.kv.Agents.Get(ctx, "edge-1")
		if err != nil {
			t.Fatal(err)
		}
		var info protocol.AgentInfo
		if err := json.Unmarshal(e.Value(), &info); err != nil {
			t.Fatal(err)
		}
		return info.Labels
	}
	for i := range 20 {
		want := strconv.Itoa(i)
		var wg sync.WaitGroup
		for _, r := range []struct {
			c   *Controller
			key string
		}{{a, "by-a"}, {b, "by-b"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.c.LabelAgent(ctx, "edge-1", protocol.LabelChange{Set: map[string]string{r.key: want}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := stored(); got["by-a"] != want || got["by-b"] != want || got["site"] != "x" {
			t.Fatalf("round %d: labels in ax_agents %v, want by-a and by-b %s and site x", i, got, want)
		}
	}
	for _, c := range []*Controller{a, b} {
		eventually(t, 10*time.Second, "both changes in each replica's view", func() bool {
			info, _ := c.agents.Get("edge-1")
			return info.Labels["by-a"] == "19" && info.Labels["by-b"] == "19"
		})
	}
}
