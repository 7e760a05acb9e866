package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// The cluster of TestFaultInjection: a controller process (embedded NATS
// on a fixed port with its store in a fixed directory, the HTTP API on a
// fixed port, so that a restart after SIGKILL is the same controller at
// the same addresses) and three agent processes, each linked to NATS
// through its own faultproxy. In TestFaultInjectionReplicas the controller is
// replicas on a NATS server of the test's (fault_replicas_test.go).

const (
	envFaultCtlDir  = "AX_E2E_FAULT_CTL_DIR"
	envFaultCtlNATS = "AX_E2E_FAULT_CTL_NATS_PORT"
	envFaultCtlAPI  = "AX_E2E_FAULT_CTL_API_ADDR"
	// envFaultCtlNATSURL and envFaultCtlNode make the helper a replica on
	// an external server (through its proxy) instead of embedding one.
	envFaultCtlNATSURL = "AX_E2E_FAULT_CTL_NATS_URL"
	envFaultCtlNode    = "AX_E2E_FAULT_CTL_NODE"

	// faultLeaseTTL is the lease TTL of the fault test: link cuts, freezes
	// and controller outages of 0.3-6s are shorter and longer than it.
	faultLeaseTTL = 2 * time.Second
	// faultAckWait is short so that a report pulled by a controller killed
	// before it acknowledged comes back soon after the restart.
	faultAckWait = 2 * time.Second
	// faultGroup is the label every agent of the test has.
	faultGroup = "role=fault"
)

// faultCtlConfig is the controller config of the fault test.
func faultCtlConfig(dir string, natsPort int) controller.Config {
	cfg := ctlConfig(dir, natsPort)
	cfg.Node = "fault"
	cfg.LeaseTTL = faultLeaseTTL
	cfg.LeaseRenewInterval = faultLeaseTTL / 3
	cfg.AckWait = faultAckWait
	if v := os.Getenv(envFaultDedupWindow); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			testutil.ChildFail(fmt.Errorf("%s: %w", envFaultDedupWindow, err))
		}
		cfg.Reports.DedupWindow = d
	}
	return cfg
}

// TestHelperFaultController is not a test: faultCluster runs the test
// binary again with it to get the controller in a process of its own.
// It prints READY once the controller and its API are up, and exits when
// its parent goes away (stdin closes), or with an ERROR line when the
// controller fails (its store cannot be written).
func TestHelperFaultController(t *testing.T) {
	dir := testutil.ChildEnv(t, envFaultCtlDir, "TestFaultInjection")
	fail := testutil.ChildFail
	var cfg controller.Config
	if url := os.Getenv(envFaultCtlNATSURL); url != "" {
		cfg = faultCtlConfig(dir, -1)
		cfg.NATS.URL, cfg.Node = url, os.Getenv(envFaultCtlNode)
	} else {
		port, err := strconv.Atoi(os.Getenv(envFaultCtlNATS))
		if err != nil {
			fail(err)
		}
		cfg = faultCtlConfig(dir, port)
	}
	c, err := controller.New(cfg)
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		fail(err)
	}
	h, err := api.NewHandler(api.Options{Backend: c, Metrics: c.Registry(), Logger: testutil.Logger().With("who", "api")})
	if err != nil {
		fail(err)
	}
	ln, err := net.Listen("tcp", os.Getenv(envFaultCtlAPI))
	if err != nil {
		fail(err)
	}
	go func() { _ = http.Serve(ln, h) }()
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	fmt.Println("READY")
	select {
	case <-gone:
		os.Exit(3)
	case <-c.Failed():
		// As ax-controller serve does: a controller whose store cannot be
		// written stops (its ERROR line is printed on the test's stderr).
		fail(c.Err())
	}
}

// faultAgent is one agent of the cluster.
type faultAgent struct {
	id      string
	dir     string // its SQLite store, kept across restarts
	proxy   *faultproxy.Proxy
	proc    *agentProc // nil while killed
	stopped bool       // SIGSTOPped
	kills   []time.Time
}

// faultCluster is the controller (or its replicas) and the agents, and
// what was done to them.
type faultCluster struct {
	t        *testing.T
	ctls     []*faultCtl
	front    *apiFront // nil for a lone controller
	natsPort int       // the lone controller's embedded server, or the replicas' server
	apiAddr  string    // the lone controller's API, or the replicas' front
	api      *client.Client
	agents   []*faultAgent
	agentEnv []string
	fires    string
	t0       time.Time // start of the fault phase
	applied  []string  // what was done, for the report
}

// newFaultCluster starts the controller (replicas ≥ 2: that many replicas
// on a NATS server in this process) and n agents (ids a1..an, label
// faultGroup) whose processes get agentEnv, and waits until they are online.
func newFaultCluster(t *testing.T, n, replicas int, agentEnv []string) *faultCluster {
	t.Helper()
	c := &faultCluster{t: t, agentEnv: agentEnv}
	if replicas < 2 {
		c.natsPort = testutil.FreePort(t)
		c.ctls = []*faultCtl{{node: "controller", dir: t.TempDir()}}
	} else {
		srv := natstest.Start(t)
		_, port, _ := net.SplitHostPort(srv.Addr())
		c.natsPort, _ = strconv.Atoi(port)
		var addrs []string
		for i := range replicas {
			p, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", c.natsPort))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			c.ctls = append(c.ctls, &faultCtl{node: fmt.Sprintf("fault-%d", i+1), dir: t.TempDir(), proxy: p})
			addrs = append(addrs, "")
		}
		c.front, c.apiAddr = newAPIFront(t, addrs)
	}
	for i := range c.ctls {
		c.firstStart(i)
	}
	var err error
	if c.api, err = client.New("http://"+c.apiAddr, "", client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second})); err != nil {
		t.Fatal(err)
	}
	c.fires = filepath.Join(t.TempDir(), "fires.log") // the "record" handler's file; unused here
	for i := range n {
		p, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", c.natsPort))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		a := &faultAgent{id: fmt.Sprintf("a%d", i+1), dir: t.TempDir(), proxy: p}
		c.agents = append(c.agents, a)
		c.startAgent(a)
	}
	for _, a := range c.agents {
		c.waitOnline(a.id)
	}
	return c
}

// natsURL is the controller's NATS server, not through a proxy.
func (c *faultCluster) natsURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", c.natsPort) }

func (c *faultCluster) note(format string, args ...any) {
	now := time.Now()
	c.applied = append(c.applied, fmt.Sprintf("%6.1fs %s ", now.Sub(c.t0).Seconds(), now.Format("15:04:05.000"))+fmt.Sprintf(format, args...))
}

// firstStart starts controller i on ports drawn now. They were free when
// drawn; another test process may take one before the controller binds
// it: draw again (a restart keeps them).
func (c *faultCluster) firstStart(i int) {
	c.t.Helper()
	ctl := c.ctls[i]
	for try := 1; ; try++ {
		ctl.apiAddr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(c.t))
		if c.front == nil {
			c.apiAddr = ctl.apiAddr
		}
		proc, line := testutil.TryStartChild(c.t, "TestHelperFaultController", ctl.env(c.natsPort), 90*time.Second)
		if line == "" {
			ctl.proc = proc
			c.frontSet(i)
			return
		}
		if try == 3 || !strings.Contains(line, "address already in use") {
			c.t.Fatalf("TestHelperFaultController process %s: %q", ctl.node, line)
		}
		if c.front == nil {
			c.natsPort = testutil.FreePort(c.t)
		}
	}
}

// frontSet tells the front whether controller i is up.
func (c *faultCluster) frontSet(i int) {
	if c.front != nil {
		c.front.set(i, c.ctls[i].apiAddr, c.ctls[i].up())
	}
}

func (c *faultCluster) startController(i int) {
	c.t.Helper()
	ctl := c.ctls[i]
	ctl.proc = testutil.StartChild(c.t, "TestHelperFaultController", ctl.env(c.natsPort), 90*time.Second)
	ctl.stopped = false
	c.frontSet(i)
}

func (c *faultCluster) killController(i int) {
	ctl := c.ctls[i]
	ctl.proc.Kill()
	ctl.proc = nil
	c.frontSet(i)
}

func (c *faultCluster) signalController(i int, sig syscall.Signal) {
	c.t.Helper()
	ctl := c.ctls[i]
	if err := ctl.proc.Signal(sig); err != nil {
		c.t.Fatalf("signal %s: %v", ctl.node, err)
	}
	ctl.stopped = sig == syscall.SIGSTOP
	c.frontSet(i)
}

// linkFault starts (on) or ends a fault of replica i's link to the NATS
// server: a cut (its connections reset, new ones refused) or a freeze
// (its connection stays open and carries nothing, as over a link that
// drops packets without a reset, until its pings time out).
func (c *faultCluster) linkFault(i int, freeze, on bool) {
	ctl := c.ctls[i]
	switch {
	case on && freeze:
		ctl.proxy.Freeze()
	case on:
		ctl.proxy.Cut()
	default:
		ctl.proxy.Thaw()
		ctl.proxy.Heal()
	}
	ctl.cut = on
	c.frontSet(i)
}

func (c *faultCluster) startAgent(a *faultAgent) {
	c.t.Helper()
	a.proc = startAgentProcIn(c.t, a.id, a.proxy.URL(), faultGroup, c.fires, a.dir, 0, c.agentEnv...)
	a.stopped = false
}

func (c *faultCluster) killAgent(a *faultAgent) {
	a.kills = append(a.kills, time.Now())
	a.proc.Kill()
	a.proc = nil
}

func (c *faultCluster) signalAgent(a *faultAgent, sig syscall.Signal) {
	c.t.Helper()
	if err := a.proc.Signal(sig); err != nil {
		c.t.Fatalf("signal %s: %v", a.id, err)
	}
	a.stopped = sig == syscall.SIGSTOP
}

// healAll undoes every fault still in force: SIGCONT, heal, restart.
func (c *faultCluster) healAll() {
	c.t.Helper()
	for i, ctl := range c.ctls {
		if ctl.cut {
			c.linkFault(i, false, false)
		}
		switch {
		case ctl.proc == nil:
			c.startController(i)
		case ctl.stopped:
			c.signalController(i, syscall.SIGCONT)
		}
	}
	for _, a := range c.agents {
		a.proxy.Heal()
		switch {
		case a.proc == nil:
			c.startAgent(a)
		case a.stopped:
			c.signalAgent(a, syscall.SIGCONT)
		}
	}
}

// waitReady waits until every controller's API answers /readyz.
func (c *faultCluster) waitReady() {
	c.t.Helper()
	for _, ctl := range c.ctls {
		api, err := client.New("http://"+ctl.apiAddr, "", client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
		if err != nil {
			c.t.Fatal(err)
		}
		testutil.EventuallyFunc(c.t, 90*time.Second, func() string { return fmt.Sprintf("%s ready (last: %v)", ctl.node, err) }, func() bool {
			err = api.Ready(context.Background())
			return err == nil
		})
	}
}

// waitOnline waits until the controller lists agent id online.
func (c *faultCluster) waitOnline(id string) {
	c.t.Helper()
	testutil.EventuallyFunc(c.t, 60*time.Second, func() string { return "agent " + id + " online" }, func() bool {
		as, err := c.api.ListAgents(context.Background())
		if err != nil {
			return false
		}
		for _, a := range as {
			if a.Agent == id && a.Online {
				return true
			}
		}
		return false
	})
}

// killedAfter is the first time agent id was SIGKILLed at or after from
// (zero: never).
func (c *faultCluster) killedAfter(id string, from time.Time) time.Time {
	for _, a := range c.agents {
		if a.id != id {
			continue
		}
		for _, k := range a.kills {
			if !k.Before(from) {
				return k
			}
		}
	}
	return time.Time{}
}

// reportsWaiting is the number of agent reports stored in AX_RPT (work
// queue: acknowledged reports are deleted) that their shard's consumer
// has not acknowledged, and what the first of them are (subject, kind,
// execution, attempt, epoch).
//
// A report at or below its consumer's ack floor was applied and
// acknowledged, yet a kill -9 of the embedded server can leave it stored:
// the server persisted the consumer's ack floor but not the work queue's
// removal of the message. Such a report is never delivered again (the
// replica of shard 0 purges it, controller/ingest/reportstream.go); it is listed
// (as "acknowledged") but not counted.
func (c *faultCluster) reportsWaiting(ctx context.Context) (uint64, string, error) {
	nc, err := nats.Connect(c.natsURL(), nats.Timeout(2*time.Second))
	if err != nil {
		return 0, "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, "", err
	}
	s, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		return 0, "", err
	}
	st := s.CachedInfo().State
	consumers := map[string]*jetstream.ConsumerInfo{}
	consumerOf := func(shard string) *jetstream.ConsumerInfo {
		if ci, ok := consumers[shard]; ok {
			return ci
		}
		var info *jetstream.ConsumerInfo
		if cons, err := js.Consumer(ctx, protocol.StreamReports, "ax-shard-"+shard); err == nil {
			info = cons.CachedInfo()
		}
		consumers[shard] = info
		return info
	}
	var waiting uint64
	var seen []string
	// The next stored report at or after seq, one request each: the
	// deleted (acknowledged) sequences in between are skipped by the server.
	for seq, found := st.FirstSeq, uint64(0); found < st.Msgs && seq <= st.LastSeq; found++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(protocol.SubjectReportsAll))
		if err != nil {
			break // none left (deleted since the stream's info was read)
		}
		seq = m.Sequence + 1
		cons, acked := "no consumer", false
		if parts := strings.Split(m.Subject, "."); len(parts) == 4 {
			if i := consumerOf(parts[2]); i != nil {
				acked = m.Sequence <= i.AckFloor.Stream
				cons = fmt.Sprintf("consumer %s: ack floor %d, ack pending %d, redelivered %d, not yet delivered %d",
					i.Name, i.AckFloor.Stream, i.NumAckPending, i.NumRedelivered, i.NumPending)
			}
		}
		if !acked {
			waiting++
		}
		if len(seen) >= 3 {
			continue
		}
		what := "waiting"
		if acked {
			what = "acknowledged, left stored"
		}
		r, err := protocol.DecodeReport(m.Data)
		if err != nil {
			seen = append(seen, fmt.Sprintf("%s seq %d (%s): undecodable: %v", m.Subject, m.Sequence, what, err))
			continue
		}
		seen = append(seen, fmt.Sprintf("%s seq %d (%s) %s %s #%d epoch %d stored %s (%s)",
			m.Subject, m.Sequence, what, r.Kind, r.ExecID, r.Attempt, r.Epoch, fmtTime(m.Time), cons))
	}
	return waiting, strings.Join(seen, "; "), nil
}
