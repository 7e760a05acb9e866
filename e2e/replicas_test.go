package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// Settings of the controller replicas in these tests: a short lease so
// that a dead replica's shards move within seconds.
const (
	replicaShards   = 16
	replicaLeaseTTL = 2 * time.Second
	replicaRenew    = 300 * time.Millisecond
	replicaAckWait  = 2 * time.Second
)

// replicaConfig is the config of controller replica node against the
// external NATS server (or cluster) at url. The in-process replicas and
// the child-process one (TestHelperReplicaProcess) use it alike.
func replicaConfig(url, node string) controller.Config {
	cfg := ctlConfig("", -1)
	cfg.Node = node
	cfg.NATS.URL = url
	cfg.Shards = replicaShards
	cfg.LeaseTTL = replicaLeaseTTL
	cfg.LeaseRenewInterval = replicaRenew
	cfg.AckWait = replicaAckWait
	cfg.Logger = testutil.Logger().With("who", node)
	return cfg
}

// ownerCounts counts the shards per owner ("" for shards without one).
func ownerCounts(owners []string) map[string]int {
	out := map[string]int{}
	for _, o := range owners {
		out[o]++
	}
	return out
}

// gauge returns the value of an unlabelled gauge of c's registry.
func gauge(tb testing.TB, c *controller.Controller, name string) float64 {
	tb.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	tb.Fatalf("metric %s not found", name)
	return 0
}

// leasesDump lists the keys of ax_leases on the server at url with their
// revision, age and value, for failure messages.
func leasesDump(url string) string {
	nc, err := nats.Connect(url)
	if err != nil {
		return "ax_leases: " + err.Error()
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, protocol.BucketLeases)
	if err != nil {
		return "ax_leases: " + err.Error()
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		return "ax_leases keys: " + err.Error()
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("ax_leases on the server:")
	for _, k := range keys {
		if e, err := kv.Get(ctx, k); err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", k, err)
		} else {
			fmt.Fprintf(&b, "\n  %s rev %d age %s: %s", k, e.Revision(), time.Since(e.Created()).Round(time.Millisecond), e.Value())
		}
	}
	return b.String()
}

// waitShares waits until every replica in cs sees the shards split as
// want (node → shard count, through Controller.ShardOwners) and reports
// its own share in ax_shards_owned, and returns how long after from it
// first held. url is the NATS server, for the failure message.
func waitShares(tb testing.TB, url string, from time.Time, cs map[string]*controller.Controller, want map[string]int) time.Duration {
	tb.Helper()
	var last []string
	testutil.EventuallyFunc(tb, 20*time.Second, func() string {
		return fmt.Sprintf("shards split %v; last seen %s\n%s", want, strings.Join(last, "; "), leasesDump(url))
	}, func() bool {
		last = last[:0]
		ok := true
		for _, node := range slices.Sorted(maps.Keys(cs)) {
			c := cs[node]
			got := ownerCounts(c.ShardOwners())
			m := gauge(tb, c, "ax_shards_owned")
			last = append(last, fmt.Sprintf("%s sees %v, owns %v", node, got, m))
			ok = ok && maps.Equal(got, want) && m == float64(want[node])
		}
		return ok
	})
	return time.Since(from)
}

// TestReplicasShareShards: controller replicas on one NATS server split
// the 16 shards fairly — 8/8 for two, 6/5/5 once a third joins (within a
// few renew intervals, handed over gracefully) — as seen by every replica
// and by each one's ax_shards_owned; a replica that stops cleanly releases
// its shards so the others own all 16 before the lease TTL; a replica
// started with another shard count is refused with a config error.
func TestReplicasShareShards(t *testing.T) {
	s := natstest.Start(t)
	a := startCtl(t, replicaConfig(s.URL(), "ctl-a"))
	started := time.Now()
	b := startCtl(t, replicaConfig(s.URL(), "ctl-b"))
	took := waitShares(t, s.URL(), started, map[string]*controller.Controller{"ctl-a": a, "ctl-b": b}, map[string]int{"ctl-a": 8, "ctl-b": 8})
	t.Logf("two replicas: 8/8 %s after the second was started", took.Round(time.Millisecond))

	starting := time.Now()
	c := startCtl(t, replicaConfig(s.URL(), "ctl-c"))
	joined := time.Now()
	all := map[string]*controller.Controller{"ctl-a": a, "ctl-b": b, "ctl-c": c}
	took = waitShares(t, s.URL(), joined, all, map[string]int{"ctl-a": 6, "ctl-b": 5, "ctl-c": 5})
	t.Logf("third replica: 6/5/5 %s after it was ready (%s after Start was called)", took.Round(time.Millisecond),
		time.Since(starting).Round(time.Millisecond))
	if budget := 5 * replicaRenew; took > budget {
		t.Errorf("fair share after a join took %s, budget %s (5 renew intervals)", took, budget)
	}

	closing := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	took = waitShares(t, s.URL(), closing, map[string]*controller.Controller{"ctl-a": a, "ctl-b": b}, map[string]int{"ctl-a": 8, "ctl-b": 8})
	t.Logf("clean stop of ctl-c: 8/8 again %s after Close began", took.Round(time.Millisecond))
	if took >= replicaLeaseTTL {
		t.Errorf("shards of a cleanly stopped replica moved after %s, not before the lease TTL %s", took, replicaLeaseTTL)
	}

	cfg := replicaConfig(s.URL(), "ctl-d")
	cfg.Shards = 8
	d, err := controller.New(cfg)
	if err != nil {
		t.Fatalf("controller.New with 8 shards: %v", err)
	}
	err = d.Start(testutil.Context(t, 60*time.Second))
	_ = d.Close()
	if err == nil || !errors.Is(err, controller.ErrConfig) || !strings.Contains(err.Error(), "shards") {
		t.Fatalf("Start with 8 shards on 16-shard streams: %v; want an error wrapping ErrConfig naming shards", err)
	}
	t.Logf("8 shards refused: %v", err)
	waitShares(t, s.URL(), time.Now(), map[string]*controller.Controller{"ctl-a": a, "ctl-b": b}, map[string]int{"ctl-a": 8, "ctl-b": 8})
}

// connectedTo returns the index of the cluster node serving the client
// connection named name, -1 when none does.
func connectedTo(tb testing.TB, cl *natstest.Cluster, name string) int {
	tb.Helper()
	for i := range cl.N() {
		srv := cl.Server(i)
		if srv == nil {
			continue
		}
		cz, err := srv.Connz(&server.ConnzOptions{})
		if err != nil {
			tb.Fatalf("connz of %s: %v", cl.Name(i), err)
		}
		for _, ci := range cz.Conns {
			if ci.Name == name {
				return i
			}
		}
	}
	return -1
}

// consumerLeaders names the node leading each consumer of stream.
func consumerLeaders(tb testing.TB, url, stream string) string {
	tb.Helper()
	nc, js := natstest.Connect(tb, url)
	defer nc.Close()
	ctx := testutil.Context(tb, 10*time.Second)
	var out []string
	st, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	l := st.ListConsumers(ctx)
	for info := range l.Info() {
		leader := "?"
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		out = append(out, fmt.Sprintf("%s %v on %s", info.Name, info.Config.FilterSubjects, leader))
	}
	if err := l.Err(); err != nil {
		out = append(out, err.Error())
	}
	return stream + " consumers: " + strings.Join(out, ", ")
}

// countSince counts the executions of job that were scheduled after t and
// ended SUCCESS, as ListExecutions on c returns them.
func countSince(c *controller.Controller, job string, t time.Time) (int, error) {
	es, _, err := c.ListExecutions(context.Background(), controller.ExecFilter{JobID: job, Limit: 1000})
	n := 0
	for _, e := range es {
		if e.State == protocol.StateSuccess && e.ScheduledAt.After(t) {
			n++
		}
	}
	return n, err
}

// TestNATSClusterNodeLoss: two controller replicas and two agents on a
// three-node NATS cluster (streams and buckets R3). Stopping one node —
// the one the first replica is connected to, so that it must fail over
// to another node as well — does not stop the work: pinned periodic jobs
// and a group job keep reaching SUCCESS, the API (CreateJob,
// ListExecutions) answers, and the two replicas hold all 16 shards
// between them.
func TestNATSClusterNodeLoss(t *testing.T) {
	if raceDetector {
		// nats-server 2.15.2 reads a clustered stream's map of expected
		// subject sequences without its lock (jetstream_cluster.go:6083)
		// while the stream's first compare-and-set write creates it
		// (jetstream_batching.go:493); -race reports it now and then (CI,
		// 2026-12-07). A race in the server, not in ax: scripts/test.sh
		// runs this test again without -race.
		t.Skip("nats-server 2.15.2's clustered streams race under -race (the expected-subject-sequence map); run without -race")
	}
	cl := natstest.StartCluster(t, 3)
	urls := cl.ClientURLs()
	// R3 writes go through a raft quorum of in-process servers and can be
	// slow under the race detector; the replicas keep the same 2s lease TTL
	// (a renewal whose answer is lost but that landed still counts).
	var cfgs []controller.Config
	for _, node := range []string{"ctl-a", "ctl-b"} {
		cfg := replicaConfig(urls, node)
		cfg.NATS.Replicas = 3
		cfgs = append(cfgs, cfg)
	}
	a := startCtl(t, cfgs[0])
	b := startCtl(t, cfgs[1])
	both := map[string]*controller.Controller{"ctl-a": a, "ctl-b": b}
	waitShares(t, urls, time.Now(), both, map[string]int{"ctl-a": 8, "ctl-b": 8})

	pinned, group := &fireLog{}, &fireLog{}
	for _, id := range []string{"edge-1", "edge-2"} {
		startAgent(t, agentConfig(id, urls, t.TempDir(), map[string]string{"role": "edge"}),
			agent.WithHandler("record", pinned.handler(id)), agent.WithHandler("group", group.handler(id)))
		waitAgentOnline(t, a, id)
	}
	every := schedule.Spec{Every: "200ms"}
	jobs := []protocol.Job{
		createJob(t, a, protocol.Job{Name: "pinned-1", Handler: "record", Schedule: every, Target: protocol.Target{Agent: "edge-1"}}),
		createJob(t, b, protocol.Job{Name: "pinned-2", Handler: "record", Schedule: every, Target: protocol.Target{Agent: "edge-2"}}),
		createJob(t, a, protocol.Job{Name: "group", Handler: "group", Schedule: every, Target: protocol.Target{Group: "role=edge"}}),
	}
	for _, j := range jobs {
		waitExecs(t, a, j.ID, 3, "SUCCESS", inState(protocol.StateSuccess))
	}

	victim := connectedTo(t, cl, "ax-controller-ctl-a")
	if victim < 0 {
		t.Fatalf("no node serves ctl-a's connection: %s", cl)
	}
	t.Logf("stopping %s (ctl-a is connected to it, ctl-b to %s; meta leader is %s)", cl.Name(victim),
		cl.Name(max(connectedTo(t, cl, "ax-controller-ctl-b"), 0)), cl.Name(max(cl.Leader(), 0)))
	t.Logf("before the stop: %s", consumerLeaders(t, urls, protocol.StreamCommands))
	stopped := time.Now()
	cl.Stop(victim)

	took := waitShares(t, urls, stopped, both, map[string]int{"ctl-a": 8, "ctl-b": 8})
	t.Logf("shards 8/8 %s after the node stop", took.Round(time.Millisecond))
	// While the cluster moves the leaders of the stopped node, an API call
	// may time out; such errors are logged and the call tried again. The
	// API must answer once the work has gone on (checked below).
	for _, j := range jobs {
		for _, name := range []string{"ctl-a", "ctl-b"} {
			var n int
			var err error
			testutil.EventuallyFunc(t, 30*time.Second, func() string {
				return fmt.Sprintf("3 executions of %s scheduled after the node stop reach SUCCESS; have %d (%v)", j.Name, n, err)
			}, func() bool {
				if n, err = countSince(both[name], j.ID, stopped); err != nil {
					t.Logf("%s after the node stop: ListExecutions on %s: %v", time.Since(stopped).Round(time.Millisecond), name, err)
				}
				return n >= 3
			})
		}
		t.Logf("%s: 3 new executions SUCCESS %s after the node stop", j.Name, time.Since(stopped).Round(time.Millisecond))
	}
	for _, name := range []string{"ctl-a", "ctl-b"} {
		c := both[name]
		created := time.Now()
		j := createJob(t, c, protocol.Job{Name: "after-stop-" + name, Handler: "record", Schedule: schedule.Spec{Asap: true},
			Target: protocol.Target{Agent: "edge-1"}})
		waitExecs(t, c, j.ID, 1, "SUCCESS", inState(protocol.StateSuccess))
		t.Logf("job created on %s %s after the node stop: SUCCESS %s later", name, created.Sub(stopped).Round(time.Millisecond),
			time.Since(created).Round(time.Millisecond))
		if _, _, err := c.ListExecutions(context.Background(), controller.ExecFilter{}); err != nil {
			t.Errorf("%s: ListExecutions after the node stop: %v", name, err)
		}
	}
	waitShares(t, urls, stopped, both, map[string]int{"ctl-a": 8, "ctl-b": 8})
	if now := connectedTo(t, cl, "ax-controller-ctl-a"); now < 0 || now == victim {
		t.Errorf("ctl-a is not connected to a running node (node %d)", now)
	}
	checkFencing(t, group.snapshot())
}
