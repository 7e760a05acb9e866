package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// The group leases alone, on a real nats-server: one lone replica (an
// Ownership holding every shard) whose GroupLeases is driven by the test
// (Manage, RenewLeases, ReleaseLeases) with a host that records what it
// is asked (groupHost) and agents written to ax_agents as the fleet reads
// them. The lease protocol with real agents and whole controllers is the
// controller package's tests'.

// groupHost is a GroupLeaseHost that records the commands and the leases
// to settle, and reads jobs from a map.
type groupHost struct {
	mu      sync.Mutex
	cmds    []protocol.Command
	settled []Lost
	jobs    map[string]protocol.Job
}

func (h *groupHost) PublishCommand(_ context.Context, cmd protocol.Command, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, cmd)
	return nil
}

func (h *groupHost) ReadJob(_ context.Context, id string) (protocol.Job, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[id]
	if !ok {
		return protocol.Job{}, fmt.Errorf("read job %s: %w", id, ErrJobNotFound)
	}
	return j, nil
}

func (h *groupHost) SettleEpochs(_ context.Context, lost []Lost) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settled = append(h.settled, lost...)
}

// sent is one command of a groupHost, as the tests compare them.
type sent struct {
	kind  protocol.CommandKind
	agent string
	epoch uint64 // an assign's
}

// commands returns the commands published so far about job.
func (h *groupHost) commands(job string) []sent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sent
	for _, c := range h.cmds {
		switch {
		case c.Kind == protocol.CmdAssign && c.Assign.Job.ID == job:
			out = append(out, sent{c.Kind, c.Agent, c.Assign.Epoch})
		case c.Kind == protocol.CmdUnassign && c.Unassign.JobID == job:
			out = append(out, sent{c.Kind, c.Agent, 0})
		}
	}
	return out
}

// lost returns the leases given to SettleEpochs so far.
func (h *groupHost) lost() []Lost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.settled)
}

// nopFleetHost is a fleet.Host with nothing to do: the fleet here only
// loads the registry.
type nopFleetHost struct{}

func (nopFleetHost) ReconcileAgent(context.Context, *protocol.AgentInfo, protocol.AgentInfo, bool) {}
func (nopFleetHost) PlaceUnplaced(context.Context, protocol.AgentInfo)                             {}
func (nopFleetHost) LastCommandSeq(context.Context, string) (uint64, error)                        { return 0, nil }
func (nopFleetHost) ResendRuns(context.Context, string, uint64)                                    {}
func (nopFleetHost) RenewLeases(_ context.Context, _ protocol.AgentInfo, c []protocol.HeldLease) ([]protocol.Lease, []protocol.HeldLease) {
	return nil, c
}
func (nopFleetHost) ReleaseLeases(context.Context, string, []protocol.HeldLease) {}

// groupFixture is a lone replica's group leases on a nats-server, with
// agents g1 and g2 in group role=pump and g3 in role=other, all online.
type groupFixture struct {
	g      *GroupLeases
	host   *groupHost
	rep    *replica
	jobs   *jobcache.Cache
	agents *fleet.Registry
	kv     streams.Buckets
	m      GroupLeaseMetrics
}

// newGroupFixture starts the fixture with lease TTL ttl.
func newGroupFixture(t *testing.T, ttl time.Duration) *groupFixture {
	t.Helper()
	url := natstest.Start(t).URL()
	nc, js := natstest.JetStream(t, url)
	kv, err := streams.Ensure(tctx(t), js, streams.Config{LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.Real{}
	now := func() time.Time { return clk.Now().UTC().Round(0) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	goRun := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	for _, a := range []struct{ id, role string }{{"g1", "pump"}, {"g2", "pump"}, {"g3", "other"}} {
		data, err := json.Marshal(protocol.AgentInfo{Agent: a.id, Labels: map[string]string{"role": a.role},
			RegisteredAt: now(), LastSeen: now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Agents.Put(tctx(t), a.id, data); err != nil {
			t.Fatal(err)
		}
	}
	fl := fleet.New(fleet.Env{
		Config: fleet.Config{Node: "ctl-a", Shards: protocol.DefaultShards, HeartbeatInterval: time.Minute,
			AgentOfflineAfter: time.Hour},
		Log: testutil.Logger(),
		Metrics: fleet.Metrics{AgentsOnline: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_agents_online"}),
			AgentsKnown: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_agents_known"}),
			AgentStats:  func(string, protocol.Stats) {}, ForgetAgent: func(string) {}},
		Clock: clk, Now: now, Mono: clk.Now, GoRun: goRun,
		Follow: func(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error {
			return kvfollow.Follow(ctx, w, apply, 1, goRun)
		},
		Instance: "ctl-a-instance", Assign: &sync.Mutex{},
	}, nopFleetHost{})
	fl.Attach(ctx, nc, js, kv)
	if err := fl.LoadAgents(tctx(t)); err != nil {
		t.Fatal(err)
	}

	rep := startReplica(t, url, "ctl-a", ttl)
	if got := len(rep.own.OwnedShards()); got != protocol.DefaultShards {
		t.Fatalf("the lone replica works %d shards, want %d", got, protocol.DefaultShards)
	}
	f := &groupFixture{host: &groupHost{jobs: map[string]protocol.Job{}}, rep: rep, jobs: jobcache.New(now),
		agents: fl.Registry(), kv: kv,
		m: GroupLeaseMetrics{
			Grants:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_lease_grants_total"}),
			Expiries:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_lease_expiries_total"}),
			Takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_lease_takeovers_total"}, []string{"kind"}),
			Failover:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ax_lease_failover_seconds"}),
		}}
	f.g = NewGroupLeases(GroupLeaseEnv{
		Config: GroupLeaseConfig{LeaseTTL: ttl, AgentOfflineAfter: time.Hour},
		Log:    testutil.Logger(), Metrics: f.m, Now: now, Mono: clk.Now, GoRun: goRun,
		Leases: rep.view, Jobs: f.jobs, Agents: f.agents, Own: rep.own,
	}, f.host)
	f.g.Attach(ctx, js, kv, kv.Leases)
	if err := f.g.FollowEpochs(tctx(t)); err != nil {
		t.Fatal(err)
	}
	return f
}

// addJob adds a periodic group job of mode any to the job cache and the
// host's ax_jobs.
func (f *groupFixture) addJob(id, group string) protocol.Job {
	j := protocol.Job{ID: id, Name: id, Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: group}, Generation: 1}
	f.jobs.Put(j, 1)
	f.host.mu.Lock()
	f.host.jobs[id] = j
	f.host.mu.Unlock()
	return j
}

// agent returns agent id's record from the registry.
func (f *groupFixture) agent(t *testing.T, id string) protocol.AgentInfo {
	t.Helper()
	a, ok := f.agents.Get(id)
	if !ok {
		t.Fatalf("agent %s not in the registry", id)
	}
	return a
}

// checkHolder fails unless EpochHolder says agent was granted epoch of
// job, and whether a later grant ended it.
func checkHolder(t *testing.T, g *GroupLeases, job string, epoch uint64, agent string, ended bool) {
	t.Helper()
	got, st, end := g.EpochHolder(tctx(t), job, epoch)
	if got != agent || st != EpochGranted || end.IsZero() == ended {
		t.Fatalf("EpochHolder(%s, %d) = %q, %v, ended %v; want %q, granted, ended %v", job, epoch, got, st, end, agent, ended)
	}
}

// TestGroupLeasesGrantRenewMoveRelease walks one group job's lease through
// the group leases: granted to the rendezvous pick of its live members
// with an epoch, recorded in the epoch history, sent once (again only
// after ForgetShard); renewed only for its holder at its epoch, for
// LeaseTTL×0.9; once lapsed, moved to the other member with a higher
// epoch (the holder told to stop, the lease given to settle, the
// metrics counted), the earlier epoch still its holder's; handed back by
// ReleaseLeases and granted again without an expiry; and, the job gone,
// its lease and epoch history deleted.
func TestGroupLeasesGrantRenewMoveRelease(t *testing.T) {
	const ttl = 3 * time.Second
	f := newGroupFixture(t, ttl)
	ctx := tctx(t)
	job := f.addJob("pump", "role=pump")
	holder := fleet.Rendezvous(job.ID, []protocol.AgentInfo{f.agent(t, "g1"), f.agent(t, "g2")})
	other := map[string]string{"g1": "g2", "g2": "g1"}[holder]

	f.g.Manage(ctx, time.Now())
	cur, ok := f.rep.view.Job(job.ID)
	if !ok || cur.Val.Agent != holder || cur.Val.Epoch == 0 || cur.Val.Released {
		t.Fatalf("after the first pass the lease is %+v (present %v), want granted to %s with an epoch", cur.Val, ok, holder)
	}
	epoch := cur.Val.Epoch
	if got, want := f.host.commands(job.ID), []sent{{protocol.CmdAssign, holder, epoch}}; !slices.Equal(got, want) {
		t.Fatalf("commands after the grant %+v, want %+v", got, want)
	}
	checkHolder(t, f.g, job.ID, epoch, holder, false)
	if a, e, ok := f.g.CurrentHolder(job.ID); a != holder || e != epoch || !ok {
		t.Fatalf("CurrentHolder = %s, %d, %v; want %s, %d", a, e, ok, holder, epoch)
	}
	if !f.g.IsMember(job, "g1") || !f.g.IsMember(job, "g2") || f.g.IsMember(job, "g3") || f.g.IsMember(job, "nobody") {
		t.Fatal("IsMember: want g1 and g2 members of role=pump, g3 and an unknown agent not")
	}
	if n := testutil.MetricValue(t, f.m.Grants); n != 1 || len(f.host.lost()) != 0 {
		t.Fatalf("first grant: %v grants counted, %d leases to settle; want 1 and none", n, len(f.host.lost()))
	}
	f.g.Manage(ctx, time.Now())
	if n := len(f.host.commands(job.ID)); n != 1 {
		t.Fatalf("a second pass sent %d commands in all, want the assign only", n)
	}

	claim := protocol.HeldLease{JobID: job.ID, Epoch: epoch}
	renewed, lost := f.g.RenewLeases(ctx, f.agent(t, holder), []protocol.HeldLease{claim})
	if want := []protocol.Lease{{JobID: job.ID, Epoch: epoch, TTL: protocol.Duration(ttl - ttl/10)}}; !slices.Equal(renewed, want) || len(lost) != 0 {
		t.Fatalf("holder's renewal: renewed %+v lost %+v; want %+v", renewed, lost, want)
	}
	// A job this replica's cache has not seen (its watcher behind another
	// replica's create) cannot be checked: its claim is neither renewed
	// nor lost. A job the cache saw deleted is lost.
	unseen := protocol.HeldLease{JobID: "ax-ctl-20261205000000-unseen", Epoch: 1}
	if renewed, lost := f.g.RenewLeases(ctx, f.agent(t, holder), []protocol.HeldLease{unseen}); len(renewed) != 0 || len(lost) != 0 {
		t.Fatalf("claim of a job not seen: renewed %+v lost %+v; want neither", renewed, lost)
	}
	f.jobs.Remove(unseen.JobID, 1<<40)
	if renewed, lost := f.g.RenewLeases(ctx, f.agent(t, holder), []protocol.HeldLease{unseen}); len(renewed) != 0 || !slices.Equal(lost, []protocol.HeldLease{unseen}) {
		t.Fatalf("claim of a deleted job: renewed %+v lost %+v; want it lost", renewed, lost)
	}
	for _, c := range []struct {
		agent string
		claim protocol.HeldLease
	}{{other, claim}, {"g3", claim}, {holder, protocol.HeldLease{JobID: job.ID, Epoch: epoch + 1}}} {
		renewed, lost := f.g.RenewLeases(ctx, f.agent(t, c.agent), []protocol.HeldLease{c.claim})
		if len(renewed) != 0 || !slices.Equal(lost, []protocol.HeldLease{c.claim}) {
			t.Fatalf("claim %+v of %s: renewed %+v lost %+v; want it lost", c.claim, c.agent, renewed, lost)
		}
	}
	renewedAt := time.Now()

	// The shard given away and taken back: the assignment is sent again.
	f.g.ForgetShard(f.rep.own.ShardOf(job.ID))
	f.g.Manage(ctx, time.Now())
	if got := f.host.commands(job.ID); len(got) != 2 || got[1] != (sent{protocol.CmdAssign, holder, epoch}) {
		t.Fatalf("commands after ForgetShard %+v, want the assign sent again", got)
	}

	// Not renewed for LeaseTTL: it moves. The pass is given a time past
	// the lapse (Manage judges it by its now against when the lease was
	// last seen) rather than waiting for it.
	f.g.Manage(ctx, renewedAt.Add(ttl+100*time.Millisecond))
	cur, _ = f.rep.view.Job(job.ID)
	epoch2 := cur.Val.Epoch
	if cur.Val.Agent != other || epoch2 <= epoch {
		t.Fatalf("after the lease lapsed it is %+v, want it moved to %s with an epoch above %d", cur.Val, other, epoch)
	}
	if got := f.host.commands(job.ID)[2:]; !slices.Equal(got, []sent{{protocol.CmdUnassign, holder, 0}, {protocol.CmdAssign, other, epoch2}}) {
		t.Fatalf("commands of the move %+v, want unassign to %s, assign to %s at %d", got, holder, other, epoch2)
	}
	want := []Lost{{Job: job.ID, OldAgent: holder, NewAgent: other, Epoch: epoch2}}
	testutil.Eventually(t, 10*time.Second, "the moved lease given to settle", func() bool { return slices.Equal(f.host.lost(), want) })
	checkHolder(t, f.g, job.ID, epoch, holder, true)
	checkHolder(t, f.g, job.ID, epoch2, other, false)
	if g, e, tk, fo := testutil.MetricValue(t, f.m.Grants), testutil.MetricValue(t, f.m.Expiries), testutil.MetricValue(t, f.m.Takeovers.WithLabelValues("group")), testutil.MetricValue(t, f.m.Failover); g != 2 || e != 1 || tk != 1 || fo != 1 {
		t.Fatalf("after the move: grants %v expiries %v takeovers %v failovers %v; want 2 1 1 1", g, e, tk, fo)
	}
	if renewed, _ := f.g.RenewLeases(ctx, f.agent(t, holder), []protocol.HeldLease{claim}); len(renewed) != 0 {
		t.Fatalf("the old holder's claim renewed after the move: %+v", renewed)
	}

	// Handed back: granted again at once, to the other member, no expiry.
	f.g.ReleaseLeases(ctx, other, []protocol.HeldLease{{JobID: job.ID, Epoch: epoch2}})
	if a, _, ok := f.g.CurrentHolder(job.ID); ok {
		t.Fatalf("CurrentHolder says %s holds a released lease", a)
	}
	f.g.Manage(ctx, time.Now())
	cur, _ = f.rep.view.Job(job.ID)
	epoch3 := cur.Val.Epoch
	if cur.Val.Agent != holder || epoch3 <= epoch2 || cur.Val.Released {
		t.Fatalf("after the release the lease is %+v, want it granted to %s above epoch %d", cur.Val, holder, epoch2)
	}
	want = append(want, Lost{Job: job.ID, OldAgent: other, NewAgent: holder, Epoch: epoch3})
	testutil.Eventually(t, 10*time.Second, "the released lease given to settle", func() bool { return slices.Equal(f.host.lost(), want) })
	if g, e := testutil.MetricValue(t, f.m.Grants), testutil.MetricValue(t, f.m.Expiries); g != 3 || e != 1 {
		t.Fatalf("after the hand-back: grants %v expiries %v; want 3 and 1", g, e)
	}

	// The job deleted: its lease and its epoch history go.
	f.jobs.Remove(job.ID, 2)
	f.host.mu.Lock()
	delete(f.host.jobs, job.ID)
	f.host.mu.Unlock()
	n := len(f.host.commands(job.ID))
	f.g.Manage(ctx, time.Now())
	if got := f.host.commands(job.ID)[n:]; !slices.Equal(got, []sent{{protocol.CmdUnassign, holder, 0}}) {
		t.Fatalf("commands after the deletion %+v, want unassign to %s", got, holder)
	}
	if _, ok := f.rep.view.Job(job.ID); ok {
		t.Fatal("the deleted job's lease is still in the view")
	}
	for _, b := range []struct {
		kv  jetstream.KeyValue
		key string
	}{{f.kv.Leases, JobKey(job.ID)}, {f.kv.Epochs, job.ID}} {
		if _, err := b.kv.Get(ctx, b.key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("%s of the deleted job: %v, want it gone", b.key, err)
		}
	}
	if a, st, _ := f.g.EpochHolder(ctx, job.ID, epoch3); st != EpochNeverGranted {
		t.Fatalf("EpochHolder of the deleted job = %q, %v; want never granted", a, st)
	}
}

// TestEpochHistoryKeepsTheLastGrants: two replicas record grants of one
// job in turn, each on a view that lags the other's writes (the lost
// compare-and-set makes it read the history and try again), so every
// grant is kept and each returns the grant before it; the history keeps
// the last MaxEpochGrants, an older epoch is forgotten, an epoch not yet
// granted is never granted, and each epoch ended at the next grant.
func TestEpochHistoryKeepsTheLastGrants(t *testing.T) {
	url := natstest.Start(t).URL()
	_, js := natstest.JetStream(t, url)
	kv, err := streams.Ensure(tctx(t), js, streams.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	goRun := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	replicas := make([]*GroupLeases, 2)
	for i := range replicas {
		g := NewGroupLeases(GroupLeaseEnv{
			Config: GroupLeaseConfig{LeaseTTL: 5 * time.Second, AgentOfflineAfter: time.Minute},
			Log:    testutil.Logger(), Now: func() time.Time { return time.Now().UTC().Round(0) }, Mono: time.Now,
			GoRun: goRun, Leases: NewView(),
		}, &groupHost{})
		g.Attach(ctx, js, kv, kv.Leases)
		if err := g.FollowEpochs(tctx(t)); err != nil {
			t.Fatal(err)
		}
		replicas[i] = g
	}
	const job = "pump"
	last := uint64(MaxEpochGrants + 1)
	for e := uint64(1); e <= last; e++ {
		g := replicas[e%2]
		prev, ok, err := g.RecordGrant(tctx(t), job, fmt.Sprintf("agent-%d", e), e)
		if err != nil {
			t.Fatalf("grant of epoch %d: %v", e, err)
		}
		if e == 1 && ok || e > 1 && (!ok || prev.Epoch != e-1 || prev.Agent != fmt.Sprintf("agent-%d", e-1)) {
			t.Fatalf("grant of epoch %d returned the grant before it as %+v (%v)", e, prev, ok)
		}
	}
	for _, g := range replicas {
		// A replica's view follows the other's last write a moment later.
		testutil.Eventually(t, 10*time.Second, "the view has the last grant", func() bool {
			s, ok := g.epochs.get(job)
			l, has := s.h.last()
			return ok && has && l.Epoch == last
		})
		if a, st, _ := g.EpochHolder(tctx(t), job, 1); st != EpochForgotten {
			t.Fatalf("epoch 1, older than the %d grants kept: %q, %v; want forgotten", MaxEpochGrants, a, st)
		}
		checkHolder(t, g, job, 2, "agent-2", true)
		checkHolder(t, g, job, last, fmt.Sprintf("agent-%d", last), false)
		if a, st, _ := g.EpochHolder(tctx(t), job, last+1); st != EpochNeverGranted {
			t.Fatalf("epoch %d, not granted: %q, %v; want never granted", last+1, a, st)
		}
	}
	e, err := kv.Epochs.Get(tctx(t), job)
	if err != nil {
		t.Fatal(err)
	}
	var h epochHistory
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Grants) != MaxEpochGrants || h.Grants[0].Epoch != 2 || h.Grants[len(h.Grants)-1].Epoch != last {
		t.Fatalf("ax_epochs.%s holds %d grants from %d to %d; want %d from 2 to %d", job, len(h.Grants),
			h.Grants[0].Epoch, h.Grants[len(h.Grants)-1].Epoch, MaxEpochGrants, last)
	}
}

// TestGroupLeaseOfJobNotSeenYetKept: a group lease in ax_leases whose job
// this replica's cache has not seen (written by another replica its job
// watcher is behind) is left as it is: no unassign is sent and the lease
// is not deleted, while ax_jobs holds the job. Before, the pass took the
// job for one gone and unassigned its holder. Once ax_jobs has no such
// job, the lease is removed and its holder unassigned.
func TestGroupLeaseOfJobNotSeenYetKept(t *testing.T) {
	f := newGroupFixture(t, 2*time.Second)
	ctx := tctx(t)
	id := "ax-ctl-b-20261205000000-unseen"
	j := protocol.Job{ID: id, Name: id, Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "role=pump"}, Generation: 1}
	f.host.mu.Lock()
	f.host.jobs[id] = j // in ax_jobs, not in the cache
	f.host.mu.Unlock()
	data, err := json.Marshal(Group{Job: id, Agent: "g1", Epoch: 7, GrantedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Leases.Put(ctx, JobKey(id), data); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the lease in the replica's view", func() bool {
		_, ok := f.rep.view.Job(id)
		return ok
	})
	for range 3 {
		f.g.Manage(ctx, time.Now())
	}
	if got := f.host.commands(id); len(got) != 0 {
		t.Fatalf("commands for the job not seen: %+v, want none", got)
	}
	if _, err := f.kv.Leases.Get(ctx, JobKey(id)); err != nil {
		t.Fatalf("the lease of the job not seen: %v, want it kept", err)
	}

	f.host.mu.Lock()
	delete(f.host.jobs, id) // gone from ax_jobs
	f.host.mu.Unlock()
	f.g.Manage(ctx, time.Now())
	if got := f.host.commands(id); !slices.Equal(got, []sent{{protocol.CmdUnassign, "g1", 0}}) {
		t.Fatalf("commands once the job is gone: %+v, want an unassign to g1", got)
	}
	if _, err := f.kv.Leases.Get(ctx, JobKey(id)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the lease once the job is gone: %v, want it deleted", err)
	}
}
