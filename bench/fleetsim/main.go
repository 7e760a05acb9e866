// Command fleetsim runs thousands of protocol-level simulated agents in one
// process against an ax-controller started as a child process (embedded
// NATS, nats.auth none): registrations and heartbeats, then optionally a
// kill -9 of the controller, a restart on the same data directory, and the
// time until every agent registered again. It prints the controller's and
// its own CPU and RSS, the load and the request round trips. Each
// simulated agent (agents.go) reads its commands with its own AX_CMD
// consumer and reports each run it receives as started and succeeded
// (commands.go); with -runs a run is sent to every agent through the API,
// its arrival checked and its SUCCESS read back from the API; with -list
// the fleet API's pages (GET /v1/agents?limit=100) are timed (agentlist.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/bench/internal/proc"
	"github.com/axsched/ax/pkg/protocol"
)

type config struct {
	bin              string
	agents, conns    int
	port, apiPort    int
	jobs             int
	hb, settle, meas time.Duration
	cmdHB            time.Duration // idle heartbeat of the command consumers' pulls
	kill, runs, list bool
	pprof            string
	cpuprofile       string
}

func main() {
	var c config
	flag.StringVar(&c.bin, "controller", "ax-controller", "ax-controller binary")
	flag.IntVar(&c.agents, "agents", 1000, "simulated agents")
	flag.IntVar(&c.conns, "conns", 16, "NATS connections shared by the agents")
	flag.IntVar(&c.port, "port", 14222, "embedded NATS port of the controller")
	flag.IntVar(&c.apiPort, "api-port", 18080, "API port of the controller")
	flag.IntVar(&c.jobs, "jobs", 0, "periodic jobs (every 1h) pinned to the agents round robin, created before the steady window")
	flag.BoolVar(&c.runs, "runs", true, "send a run to every agent (steady, and after the kill -9 storm) and check it arrives")
	flag.BoolVar(&c.list, "list", true, "after the steady window, page through GET /v1/agents?limit=100 (200 requests, with and without a filter) and time it")
	flag.StringVar(&c.pprof, "pprof", "", "controller --pprof-listen address (e.g. 127.0.0.1:6060), for go tool pprof")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write the simulator's own CPU profile over the steady window to this file")
	flag.DurationVar(&c.hb, "heartbeat", 5*time.Second, "heartbeat interval")
	flag.DurationVar(&c.cmdHB, "cmd-heartbeat", 10*time.Second, "idle heartbeat of each agent's command consumer pulls (ax-agent: 10s on a lone server such as the embedded one, its nats.ping_interval within 1s..10s in a cluster)")
	flag.DurationVar(&c.settle, "settle", 10*time.Second, "wait after all registered before measuring")
	flag.DurationVar(&c.meas, "measure", 30*time.Second, "steady-state measurement time")
	flag.BoolVar(&c.kill, "kill", false, "kill -9 the controller after measuring and time the re-registration storm")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

// ctl is the controller child process.
type ctl struct {
	c   config
	dir string
	cmd *exec.Cmd
}

func (k *ctl) start() error {
	args := []string{"serve", "--data-dir", k.dir, "--nats-port", strconv.Itoa(k.c.port),
		"--listen", fmt.Sprintf("127.0.0.1:%d", k.c.apiPort), "--log-level", "error"}
	if k.c.pprof != "" {
		args = append(args, "--pprof-listen", k.c.pprof)
	}
	k.cmd = exec.Command(k.c.bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = os.Stderr, os.Stderr
	return k.cmd.Start()
}

// usage returns the child's CPU time (user+system) and RSS.
func (k *ctl) usage() (time.Duration, int64) { return procUsage(strconv.Itoa(k.cmd.Process.Pid)) }

// procUsage returns process pid's CPU time (user+system) and RSS from
// /proc/<pid>/stat ("self": the simulator's own).
func procUsage(pid string) (time.Duration, int64) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, rss * int64(os.Getpagesize())
}

type agent struct {
	id     string
	site   string // its site label (agentlist.go)
	c      *conn
	reg    atomic.Bool
	spread atomic.Bool   // its connection reconnected: register again, spread
	wake   chan struct{} // cap 1: ends the agent's current wait (a reconnect)
	cons   atomic.Bool   // its command consumer is started
	cursor atomic.Uint64 // last AX_CMD sequence read
	runs   atomic.Int64  // run commands received
	// lastExec is the exec_id of the last run received (string).
	lastExec atomic.Value
}

type sim struct {
	c             config
	agents        []*agent
	mu            sync.Mutex
	regRTT, hbRTT []time.Duration
	// hbWake: of each heartbeat's round trip, the time from the reply
	// subscription's receipt to the agent's goroutine running.
	hbWake []time.Duration
	// hbOut: of each heartbeat's round trip, the time from sending to the
	// controller's reply time (controller and simulator share the clock):
	// the request's way to the controller, its queue and the handler.
	hbOut         []time.Duration
	regErr, hbErr atomic.Int64
	consErr       atomic.Int64 // command consumers that failed to start
	badCmds       atomic.Int64
	// shards is the report shard count of the registration reply.
	shards atomic.Int64
	// reports counts runs whose running and finished reports were
	// acknowledged, reportErr those whose publication failed.
	reports, reportErr atomic.Int64
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(100 * time.Microsecond)
}

func (s *sim) registered() int {
	n := 0
	for _, a := range s.agents {
		if a.reg.Load() {
			n++
		}
	}
	return n
}

func (s *sim) consumers() int {
	n := 0
	for _, a := range s.agents {
		if a.cons.Load() {
			n++
		}
	}
	return n
}

func (s *sim) waitAll(d time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	for time.Since(t0) < d {
		if s.registered() == len(s.agents) {
			return time.Since(t0), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(t0), false
}

func (s *sim) reset() {
	s.mu.Lock()
	s.regRTT, s.hbRTT, s.hbWake, s.hbOut = nil, nil, nil, nil
	s.mu.Unlock()
	s.regErr.Store(0)
	s.hbErr.Store(0)
}

func (s *sim) report(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("%s: registrations %d (errors %d) RTT p50 %s p99 %s; heartbeats %d (errors %d) RTT p50 %s p99 %s "+
		"(of which until the controller replied p50 %s p99 %s, in the simulator after receipt p50 %s p99 %s)\n", what,
		len(s.regRTT), s.regErr.Load(), pct(s.regRTT, .5), pct(s.regRTT, .99),
		len(s.hbRTT), s.hbErr.Load(), pct(s.hbRTT, .5), pct(s.hbRTT, .99),
		pct(s.hbOut, .5), pct(s.hbOut, .99), pct(s.hbWake, .5), pct(s.hbWake, .99))
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	k := &ctl{c: c, dir: filepath.Join(dir, "data")}
	if err := k.start(); err != nil {
		return err
	}
	defer func() { _ = k.cmd.Process.Kill(); _ = k.cmd.Wait() }()
	url := fmt.Sprintf("nats://127.0.0.1:%d", c.port)
	s := &sim{c: c}
	var conns []*conn
	for range c.conns {
		cn := &conn{waiting: map[string]chan reply{}}
		cn.nc, err = nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(reconnectWait), nats.RetryOnFailedConnect(true),
			nats.DisconnectErrHandler(func(*nats.Conn, error) {
				cn.mu.Lock()
				for _, a := range cn.agents {
					a.reg.Store(false) // as ax-agent: registered again after the reconnect
				}
				cn.mu.Unlock()
			}),
			nats.ReconnectHandler(func(*nats.Conn) {
				// As ax-agent: a reconnect makes every agent of the
				// connection register again, spread (agent/link.go).
				cn.mu.Lock()
				for _, a := range cn.agents {
					a.spread.Store(true)
					a.reg.Store(false)
					select {
					case a.wake <- struct{}{}:
					default:
					}
				}
				cn.mu.Unlock()
			}))
		if err != nil {
			return err
		}
		defer cn.nc.Close()
		if cn.js, err = jetstream.New(cn.nc); err != nil {
			return err
		}
		if _, err := cn.nc.Subscribe(protocol.InboxPrefix("*")+".*", func(m *nats.Msg) {
			at := time.Now()
			cn.mu.Lock()
			ch := cn.waiting[m.Subject]
			cn.mu.Unlock()
			if ch != nil {
				select {
				case ch <- reply{m: m, at: at}:
				default:
				}
			}
		}); err != nil {
			return err
		}
		conns = append(conns, cn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range c.agents {
		a := &agent{id: fmt.Sprintf("sim-%05d", i), site: siteOf(i), c: conns[i%c.conns], wake: make(chan struct{}, 1)}
		s.agents = append(s.agents, a)
		a.c.mu.Lock()
		a.c.agents = append(a.c.agents, a)
		a.c.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); s.loop(ctx, a) }()
	}
	defer func() { cancel(); wg.Wait() }()
	d, ok := s.waitAll(5 * time.Minute)
	fmt.Printf("agents %d: all registered %t after %s\n", c.agents, ok, d.Round(time.Millisecond))
	for t0 := time.Now(); s.consumers() < len(s.agents) && time.Since(t0) < 2*time.Minute; {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("command consumers started: %d of %d (failed attempts %d)\n", s.consumers(), len(s.agents), s.consErr.Load())
	s.report("start")
	api := fmt.Sprintf("http://127.0.0.1:%d", c.apiPort)
	if c.jobs > 0 {
		t0 := time.Now()
		if err := s.createPinned(ctx, api, c.jobs, 32); err != nil {
			return err
		}
		fmt.Printf("%d periodic jobs pinned to the agents created in %s\n", c.jobs, time.Since(t0).Round(time.Millisecond))
	}
	time.Sleep(c.settle)
	s.reset()
	cpu0, _ := k.usage()
	self0, _ := procUsage("self")
	t0 := time.Now()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		time.Sleep(c.meas)
		pprof.StopCPUProfile()
		_ = f.Close()
	} else {
		time.Sleep(c.meas)
	}
	cpu1, rss := k.usage()
	self1, selfRSS := procUsage("self")
	el := float64(time.Since(t0))
	fmt.Printf("steady %s: controller CPU %.1f%% of a core, RSS %d MiB; simulator CPU %.1f%%, RSS %d MiB; %s\n", c.meas,
		100*float64(cpu1-cpu0)/el, rss>>20, 100*float64(self1-self0)/el, selfRSS>>20, "load "+proc.LoadAvg())
	s.report("steady")
	if c.list {
		if err := s.agentsListPhase(ctx, api); err != nil {
			return err
		}
	}
	if c.runs {
		if err := s.runsPhase(ctx, "steady", api); err != nil {
			return err
		}
	}
	if !c.kill {
		return nil
	}
	_ = k.cmd.Process.Kill() // SIGKILL
	_ = k.cmd.Wait()
	for t0 := time.Now(); s.registered() > 0 && time.Since(t0) < 10*time.Second; {
		time.Sleep(10 * time.Millisecond) // the connections see the server gone
	}
	s.reset() // the agents register again when their connection is back (spread)
	if err := k.start(); err != nil {
		return err
	}
	go func() { // when the restarted controller answers /readyz
		t0 := time.Now()
		for ctx.Err() == nil && time.Since(t0) < 3*time.Minute {
			if res, err := http.Get(api + "/readyz"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					fmt.Printf("after kill -9: controller ready %s after the restart\n", time.Since(t0).Round(time.Millisecond))
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	d, ok = s.waitAll(3 * time.Minute)
	fmt.Printf("after kill -9: all %d re-registered %t within %s of the restart\n", c.agents, ok, d.Round(time.Millisecond))
	s.report("storm")
	if c.runs {
		return s.runsPhase(ctx, "after kill -9", api)
	}
	return nil
}
