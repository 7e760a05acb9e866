package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/internal/testutil"
)

// clusterReadyTimeout bounds how long StartCluster and Restart wait for the
// JetStream meta group to elect a leader and for every running node to
// catch up with it.
const clusterReadyTimeout = 30 * time.Second

// Cluster is an N-node nats-server cluster with JetStream, all nodes in
// this process on 127.0.0.1, owned by one test. Every node has its own
// client port, cluster (route) port and store under t.TempDir(); they are
// picked once, so that Stop(i) and Restart(i) bring a node back with the
// same identity, addresses and store, as a real node that was restarted.
type Cluster struct {
	tb    testing.TB
	name  string
	opts  []server.Options
	nodes []*server.Server // nil while stopped
}

// StartCluster starts an n-node JetStream cluster named "ax-test" and waits
// until it is ready: every node routed to every other, a JetStream meta
// leader elected that counts n peers, and every node current. The cluster
// is shut down when the test ends. opts change every node's options
// before the first start (ports, names, routes and store are set already).
func StartCluster(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("natstest: cluster of %d nodes", n)
	}
	c := &Cluster{tb: tb, name: "ax-test", nodes: make([]*server.Server, n)}
	// Pick the ports up front: every node's routes name every cluster
	// port, and a restarted node must come back on the same ones.
	clientPorts, clusterPorts := freePorts(tb, n), freePorts(tb, n)
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(p))
	}
	for i := range n {
		o := baseOptions(tb)
		o.ServerName, o.Port = fmt.Sprintf("n%d", i), clientPorts[i]
		o.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: clusterPorts[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		for _, fn := range opts {
			fn(&o)
		}
		c.opts = append(c.opts, o)
	}
	tb.Cleanup(c.StopAll)
	for i := range n {
		c.start(i)
	}
	c.WaitReady()
	return c
}

// freePorts returns n distinct loopback ports that were free a moment ago:
// all listeners are open together, so the ports differ from each other.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("natstest: free port: %v", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// start runs node i; it does not wait for the cluster.
func (c *Cluster) start(i int) {
	c.tb.Helper()
	o := c.opts[i]
	srv, err := server.NewServer(&o)
	if err != nil {
		c.tb.Fatalf("natstest: new server %s: %v", o.ServerName, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyWait) {
		srv.Shutdown()
		c.tb.Fatalf("natstest: server %s not ready within %s", o.ServerName, readyWait)
	}
	c.nodes[i] = srv
}

// WaitReady waits until the running nodes form a JetStream cluster: each
// is routed to every other running node, one of them is the meta leader
// and sees every configured node as a peer, and every running node is
// current with the meta group. It fails the test after 30s.
func (c *Cluster) WaitReady() {
	c.tb.Helper()
	why := ""
	testutil.EventuallyFunc(c.tb, clusterReadyTimeout, func() string { return "natstest: cluster ready: " + why }, func() bool {
		why = c.notReady()
		return why == ""
	})
}

// notReady says why the cluster is not ready, "" when it is.
func (c *Cluster) notReady() string {
	running := 0
	for _, s := range c.nodes {
		if s != nil {
			running++
		}
	}
	var leader *server.Server
	for _, s := range c.nodes {
		if s == nil {
			continue
		}
		if got := s.NumRemotes(); got != running-1 {
			return fmt.Sprintf("%s is routed to %d servers, want %d", s.Name(), got, running-1)
		}
		if !s.JetStreamEnabled() {
			return s.Name() + " has no JetStream yet"
		}
		if !s.JetStreamIsCurrent() {
			return s.Name() + " is not current with the meta group"
		}
		if s.JetStreamIsLeader() {
			leader = s
		}
	}
	if leader == nil {
		return "no JetStream meta leader"
	}
	if got := len(leader.JetStreamClusterPeers()); got != len(c.nodes) {
		return fmt.Sprintf("meta leader %s sees %d peers, want %d", leader.Name(), got, len(c.nodes))
	}
	return ""
}

// N is the number of nodes, running or not.
func (c *Cluster) N() int { return len(c.nodes) }

// URL is node i's client URL, nats://127.0.0.1:<port> (also while it is stopped).
func (c *Cluster) URL(i int) string {
	return (&url.URL{Scheme: "nats", Host: net.JoinHostPort(c.opts[i].Host, strconv.Itoa(c.opts[i].Port))}).String()
}

// ClientURLs returns every node's client URL, comma-joined, as nats.Connect
// (and the ax controller's and agent's nats.url) accept it.
func (c *Cluster) ClientURLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// Name returns node i's server name (n0, n1, ...).
func (c *Cluster) Name(i int) string { return c.opts[i].ServerName }

// Server returns node i (nil while it is stopped).
func (c *Cluster) Server(i int) *server.Server { return c.nodes[i] }

// Leader returns the index of the JetStream meta leader, -1 when there is none.
func (c *Cluster) Leader() int {
	for i, s := range c.nodes {
		if s != nil && s.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// Stop shuts node i down (its raft groups step down first, as a node that
// is stopped cleanly does). It is safe to call twice.
func (c *Cluster) Stop(i int) {
	s := c.nodes[i]
	if s == nil {
		return
	}
	s.Shutdown()
	s.WaitForShutdown()
	c.nodes[i] = nil
}

// Restart stops node i if it runs, starts it again with the same name,
// ports and store, and waits until the cluster is ready again.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	c.Stop(i)
	c.start(i)
	c.WaitReady()
}

// StopAll shuts every running node down; it runs when the test ends.
func (c *Cluster) StopAll() {
	for i := range c.nodes {
		c.Stop(i)
	}
}

// String describes the cluster for test logs.
func (c *Cluster) String() string {
	var parts []string
	for i := range c.nodes {
		state := "running"
		if c.nodes[i] == nil {
			state = "stopped"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", c.Name(i), c.URL(i), state))
	}
	return "nats cluster " + c.name + ": " + strings.Join(parts, ", ")
}
