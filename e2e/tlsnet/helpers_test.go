package tlsnet

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/agenttest"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// startController runs a real controller whose embedded NATS server (random
// loopback port, store in t.TempDir()) uses tc as nats.tls.
func startController(t *testing.T, tc controller.TLSConfig) *controller.Controller {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Port = -1
	cfg.NATS.TLS = tc
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.AgentOfflineAfter = 2 * time.Second
	cfg.Logger = testutil.Logger()
	ctl := apitest.Start(t, cfg)
	return ctl
}

func noop(context.Context, agent.Task) agent.Result { return agent.Result{} }

// runAgent runs a real agent (agent.New + Run) against url with tc as its
// nats.tls, until the test ends.
func runAgent(t *testing.T, id, url string, tc agent.TLSConfig) {
	t.Helper()
	cfg := agenttest.Config(id, url, t.TempDir())
	cfg.NATS.TLS = tc
	if err := cfg.Validate(); err != nil {
		t.Fatalf("agent config: %v", err)
	}
	agenttest.Start(t, cfg, agent.WithHandler("noop", noop))
}

// known reports whether the controller has ever seen agent id register.
func known(ctl *controller.Controller, id string) bool {
	as, err := ctl.ListAgents(context.Background())
	return err == nil && slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == id })
}

func online(ctl *controller.Controller, id string) func() bool {
	return func() bool {
		as, err := ctl.ListAgents(context.Background())
		return err == nil && slices.ContainsFunc(as, func(a protocol.AgentInfo) bool { return a.Agent == id && a.Online })
	}
}

// runJob creates an asap job on agent id and waits for an execution in SUCCESS.
func runJob(t *testing.T, ctl *controller.Controller, id, name string) {
	t.Helper()
	j, err := ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: name, Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: id}})
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, "an execution of "+name+" in SUCCESS", func() bool {
		es, _, err := ctl.ListExecutions(context.Background(), controller.ExecFilter{JobID: j.ID, Limit: 10})
		return err == nil && slices.ContainsFunc(es, func(e protocol.Execution) bool { return e.State == protocol.StateSuccess })
	})
}

// countingProxy forwards TCP connections to a target and counts the
// connections that ended. An agent whose connections keep ending before
// it ever registers is being refused.
type countingProxy struct {
	ln     net.Listener
	target string
	ended  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy as a NATS URL.
func (p *countingProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *countingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			p.ended.Add(1)
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			<-done
			<-done
			p.ended.Add(1)
		}()
	}
}

func (p *countingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
