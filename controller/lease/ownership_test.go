package lease

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// The ownership alone, on a real nats-server: replicas are Ownerships
// with a host that records what it is asked (recordingHost); the tests of
// whole controllers sharing shards are the controller package's.

// workerStop is one ShardWorker.Stop call.
type workerStop struct {
	shard int
	drain bool
}

// recordingHost is an OwnershipHost that starts workers reading nothing
// and records every call.
type recordingHost struct {
	mu        sync.Mutex
	started   []int
	stopped   []workerStop
	forgotten []int
	reloaded  []int
}

func (h *recordingHost) StartShardWorker(_ context.Context, n int) (ShardWorker, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = append(h.started, n)
	return recordedWorker{h, n}, nil
}

func (h *recordingHost) ReloadExecutions(_ context.Context, shards map[int]bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n := range shards {
		h.reloaded = append(h.reloaded, n)
	}
	return nil
}

func (h *recordingHost) ForgetShard(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgotten = append(h.forgotten, n)
}

func (h *recordingHost) ManageGroupLeases(context.Context, time.Time) {}
func (h *recordingHost) PlaceWaiting(context.Context, time.Time)      {}

// calls returns copies of what the host was asked so far, each sorted.
func (h *recordingHost) calls() (started []int, stopped []workerStop, forgotten, reloaded []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	started, forgotten, reloaded = slices.Sorted(slices.Values(h.started)), slices.Sorted(slices.Values(h.forgotten)),
		slices.Sorted(slices.Values(h.reloaded))
	stopped = slices.SortedFunc(slices.Values(h.stopped), func(a, b workerStop) int { return a.shard - b.shard })
	return started, stopped, forgotten, reloaded
}

// recordedWorker is shard n's worker of a recordingHost.
type recordedWorker struct {
	h *recordingHost
	n int
}

func (w recordedWorker) Stop(drain bool, _ time.Duration) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.stopped = append(w.h.stopped, workerStop{w.n, drain})
}

// replica is one Ownership with its own view of ax_leases, fed by a
// watcher as the controller's is.
type replica struct {
	own       *Ownership
	view      *View // its view of ax_leases
	host      *recordingHost
	takeovers *prometheus.CounterVec
	cancel    context.CancelFunc // a crash: the loop abandons its shards
	handedOff bool
}

// takeoverCount is the replica's ax_lease_takeovers_total{kind="shard"}.
func (r *replica) takeoverCount(t *testing.T) float64 {
	t.Helper()
	return testutil.MetricValue(t, r.takeovers.WithLabelValues("shard"))
}

// startReplica starts the ownership of node on the server at url, with
// lease TTL ttl (renewed every ttl/5) over protocol.DefaultShards shards.
// It hands its shards over when the test ends, unless it crashed.
func startReplica(t *testing.T, url, node string, ttl time.Duration) *replica {
	t.Helper()
	_, js := natstest.JetStream(t, url)
	kv, err := js.CreateOrUpdateKeyValue(tctx(t), jetstream.KeyValueConfig{Bucket: protocol.BucketLeases, History: 1, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.Real{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	goRun := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	view := NewView()
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kvfollow.Follow(tctx(t), w, func(e jetstream.KeyValueEntry) { view.Apply(e, clk.Now()) }, 1, goRun); err != nil {
		t.Fatal(err)
	}
	r := &replica{view: view, host: &recordingHost{}, cancel: cancel,
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_lease_takeovers_total"}, []string{"kind"})}
	r.own = NewOwnership(OwnershipEnv{
		Config:  OwnershipConfig{Node: node, Shards: protocol.DefaultShards, LeaseTTL: ttl, LeaseRenewInterval: ttl / 5},
		Log:     testutil.Logger(),
		Metrics: OwnershipMetrics{ShardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_shards_owned"}), Takeovers: r.takeovers},
		Clock:   clk, Now: func() time.Time { return clk.Now().UTC().Round(0) }, Mono: clk.Now, GoRun: goRun,
		Leases: view, Instance: node + "-instance", Started: clk.Now().UTC().Round(0),
	}, r.host)
	t.Cleanup(func() {
		if !r.handedOff {
			r.own.HandOver()
		}
		cancel()
		wg.Wait()
	})
	r.own.Start(tctx(t), kv)
	return r
}

// handOver is a clean stop of r (Close's).
func (r *replica) handOver() {
	r.handedOff = true
	r.own.HandOver()
}

// shardHolders reads every shard key in kv now: shard → node.
func shardHolders(t *testing.T, url string) map[int]string {
	t.Helper()
	nc, js := natstest.Connect(t, url)
	defer nc.Close()
	kv, err := js.KeyValue(tctx(t), protocol.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for n := range protocol.DefaultShards {
		e, err := kv.Get(tctx(t), ShardKey(n))
		if err != nil {
			continue
		}
		var s Shard
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			t.Fatalf("shard %d lease %q: %v", n, e.Value(), err)
		}
		out[n] = s.Node
	}
	return out
}

// TestOwnershipSplitsAndHandsOver: two replicas split the shards round
// robin (ctl-a the even ones, ctl-b the odd ones), each starting a worker
// and reloading the executions of each shard it takes; a hand-over drains
// the leaving replica's workers, forgets its shards and deletes its keys
// before it returns, and the other takes them without a takeover.
func TestOwnershipSplitsAndHandsOver(t *testing.T) {
	srv := natstest.Start(t)
	a := startReplica(t, srv.URL(), "ctl-a", 2*time.Second)
	b := startReplica(t, srv.URL(), "ctl-b", 2*time.Second)
	var even, odd, all []int
	var owners []string // as each replica's view has them, once it caught up
	for n := range protocol.DefaultShards {
		all = append(all, n)
		if n%2 == 0 {
			even = append(even, n)
		} else {
			odd = append(odd, n)
		}
		owners = append(owners, []string{"ctl-a", "ctl-b"}[n%2])
	}
	eventually(t, 10*time.Second, "ctl-a works the even shards, ctl-b the odd ones, and both views say so", func() bool {
		return slices.Equal(a.own.OwnedShards(), even) && slices.Equal(b.own.OwnedShards(), odd) &&
			slices.Equal(a.own.ShardOwners(), owners) && slices.Equal(b.own.ShardOwners(), owners)
	})
	if !a.own.Owns(0) || a.own.Owns(1) || !b.own.Owns(1) || a.own.Owns(-1) || a.own.Owns(protocol.DefaultShards) {
		t.Fatalf("Owns: ctl-a 0 %v 1 %v, ctl-b 1 %v, ctl-a -1 %v, %d %v", a.own.Owns(0), a.own.Owns(1), b.own.Owns(1),
			a.own.Owns(-1), protocol.DefaultShards, a.own.Owns(protocol.DefaultShards))
	}
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		n := protocol.Shard(id, protocol.DefaultShards)
		if a.own.ShardOf(id) != n || a.own.OwnsJob(id) != (n%2 == 0) || b.own.OwnsJob(id) != (n%2 == 1) {
			t.Fatalf("job %s: ShardOf %d (want %d), ctl-a OwnsJob %v, ctl-b OwnsJob %v", id, a.own.ShardOf(id), n,
				a.own.OwnsJob(id), b.own.OwnsJob(id))
		}
	}
	// A shard's worker starts before it counts as owned; its reload runs
	// after, on its own goroutine (shardsAcquired), so it is waited for.
	started, _, _, _ := b.host.calls()
	if !slices.Equal(slices.Compact(started), odd) {
		t.Fatalf("ctl-b started workers of %v, want %v", started, odd)
	}
	var reloaded []int
	eventually(t, 10*time.Second, "ctl-b reloaded the odd shards", func() bool {
		_, _, _, reloaded = b.host.calls()
		return slices.Equal(slices.Compact(slices.Clone(reloaded)), odd)
	})

	b.handOver()
	if got := b.own.OwnedShards(); len(got) != 0 {
		t.Fatalf("ctl-b works %v after its hand-over", got)
	}
	_, stopped, forgotten, _ := b.host.calls()
	var drained []workerStop
	for _, n := range odd {
		drained = append(drained, workerStop{n, true})
	}
	if !slices.Equal(stopped, drained) || !slices.Equal(forgotten, odd) {
		t.Fatalf("ctl-b's hand-over stopped %v and forgot %v, want every odd worker drained and forgotten", stopped, forgotten)
	}
	for n, node := range shardHolders(t, srv.URL()) {
		if node == "ctl-b" {
			t.Fatalf("shard %d still leased to ctl-b after its hand-over", n)
		}
	}
	eventually(t, 20*time.Second, "ctl-a works every shard", func() bool { return slices.Equal(a.own.OwnedShards(), all) })
	if got := a.takeoverCount(t); got != 0 {
		t.Fatalf("ctl-a counted %v shard takeovers of shards handed over, want 0", got)
	}
}

// TestOwnershipTakesOverACrashedReplica: the shards of a replica that
// stops renewing (its loop abandoned them: workers stopped undrained, keys
// left) stay its own until the lease TTL has passed, and are then taken
// over, each counted; a crash forgets nothing and releases nothing.
func TestOwnershipTakesOverACrashedReplica(t *testing.T) {
	srv := natstest.Start(t)
	ttl := 2 * time.Second
	a := startReplica(t, srv.URL(), "ctl-a", ttl)
	var all []int
	for n := range protocol.DefaultShards {
		all = append(all, n)
	}
	// A lone replica's Start returns with every shard taken and reloaded.
	if got := a.own.OwnedShards(); !slices.Equal(got, all) {
		t.Fatalf("a lone replica works %v after Start, want %v", got, all)
	}
	if _, _, _, reloaded := a.host.calls(); !slices.Equal(reloaded, all) {
		t.Fatalf("Start reloaded %v, want %v", reloaded, all)
	}

	a.handedOff = true // it crashes instead
	a.cancel()
	eventually(t, 20*time.Second, "ctl-a's workers stopped", func() bool {
		_, stopped, _, _ := a.host.calls()
		return len(stopped) == len(all)
	})
	_, stopped, forgotten, _ := a.host.calls()
	for i, s := range stopped {
		if s != (workerStop{all[i], false}) {
			t.Fatalf("ctl-a's crash stopped %v, want every worker stopped without draining", stopped)
		}
	}
	if len(forgotten) != 0 || len(a.own.OwnedShards()) != 0 {
		t.Fatalf("ctl-a's crash forgot %v, still works %v; want nothing forgotten, nothing worked", forgotten, a.own.OwnedShards())
	}
	crashed := time.Now()

	b := startReplica(t, srv.URL(), "ctl-b", ttl)
	eventually(t, 20*time.Second, "ctl-b works every shard", func() bool { return slices.Equal(b.own.OwnedShards(), all) })
	if since := time.Since(crashed); since < ttl/2 {
		t.Fatalf("ctl-b took the shards %v after ctl-a's crash, before its leases could lapse (ttl %v)", since, ttl)
	}
	if got := b.takeoverCount(t); got != float64(len(all)) {
		t.Fatalf("ctl-b counted %v shard takeovers, want %d", got, len(all))
	}
	for n, node := range shardHolders(t, srv.URL()) {
		if node != "ctl-b" {
			t.Fatalf("shard %d leased to %q after the takeover, want ctl-b", n, node)
		}
	}
}

// TestOwnershipDropsALostShard: when a shard's renewal finds another
// holder in its key, the replica stops working it at once: the worker
// stops without draining (its reports go to the new owner) and the host
// forgets the shard; the other shards stay.
func TestOwnershipDropsALostShard(t *testing.T) {
	srv := natstest.Start(t)
	a := startReplica(t, srv.URL(), "ctl-a", 2*time.Second)
	_, js := natstest.JetStream(t, srv.URL())
	kv, err := js.KeyValue(tctx(t), protocol.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(Shard{Shard: 3, Node: "intruder", Instance: "i", Since: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(tctx(t), ShardKey(3), data); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ctl-a stops working shard 3", func() bool { return !a.own.Owns(3) })
	_, stopped, forgotten, _ := a.host.calls()
	if !slices.Equal(stopped, []workerStop{{3, false}}) || !slices.Equal(forgotten, []int{3}) {
		t.Fatalf("after losing shard 3 ctl-a stopped %v and forgot %v, want shard 3's worker undrained and forgotten", stopped, forgotten)
	}
	if got := len(a.own.OwnedShards()); got != protocol.DefaultShards-1 {
		t.Fatalf("ctl-a works %d shards after losing one, want %d", got, protocol.DefaultShards-1)
	}
}

// tctx is a context for one request of a test.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every few milliseconds until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); ; <-tick.C {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for: %s", d, what)
		}
	}
}

// TestOwnsJobSurely: a worked shard is surely this replica's only while
// its lease was acquired or renewed within LeaseTTL − LeaseRenewInterval;
// past that (a process frozen or cut off) it may be another's already,
// though the loop has not yet stopped it. A shard not worked never is.
func TestOwnsJobSurely(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	o := NewOwnership(OwnershipEnv{
		Config: OwnershipConfig{Node: "ctl-a", Shards: protocol.DefaultShards, LeaseTTL: 10 * time.Second, LeaseRenewInterval: 2 * time.Second},
		Log:    testutil.Logger(), Clock: clk, Now: clk.Now, Mono: clk.Now,
		Leases: NewView(), Instance: "ctl-a-1", Started: clk.Now(),
	}, &recordingHost{})
	const job = "job-1"
	n := o.ShardOf(job)
	clk.Advance(time.Minute)
	if o.OwnsJobSurely(job) {
		t.Fatal("OwnsJobSurely of a shard not worked = true")
	}
	o.owned[n].Store(true)
	o.noteRenewed(n, clk.Now())
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {7999 * time.Millisecond, true}, {8 * time.Second, false}, {time.Minute, false}} {
		o.noteRenewed(n, clk.Now())
		clk.Advance(tc.after)
		if got := o.OwnsJobSurely(job); got != tc.want {
			t.Errorf("OwnsJobSurely %v after the renewal = %v, want %v", tc.after, got, tc.want)
		}
	}
}
