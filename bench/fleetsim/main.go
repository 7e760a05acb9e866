// Command fleetsim runs thousands of protocol-level simulated agents in one
// process against an ax-controller started as a child process (embedded
// NATS, nats.auth none): registrations and heartbeats, then optionally a
// kill -9 of the controller, a restart on the same data directory, and the
// time until every agent registered again. It prints the controller's CPU
// and RSS and the request round trips. Each simulated agent reads its
// commands with its own AX_CMD consumer (commands.go); with -runs a run is
// sent to every agent through the API and its arrival checked. Simulated
// agents send no reports.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

type config struct {
	bin              string
	agents, conns    int
	port, apiPort    int
	hb, settle, meas time.Duration
	kill, runs       bool
	pprof            string
}

func main() {
	var c config
	flag.StringVar(&c.bin, "controller", "ax-controller", "ax-controller binary")
	flag.IntVar(&c.agents, "agents", 1000, "simulated agents")
	flag.IntVar(&c.conns, "conns", 16, "NATS connections shared by the agents")
	flag.IntVar(&c.port, "port", 14222, "embedded NATS port of the controller")
	flag.IntVar(&c.apiPort, "api-port", 18080, "API port of the controller")
	flag.BoolVar(&c.runs, "runs", true, "send a run to every agent (steady, and after the kill -9 storm) and check it arrives")
	flag.StringVar(&c.pprof, "pprof", "", "controller --pprof-listen address (e.g. 127.0.0.1:6060), for go tool pprof")
	flag.DurationVar(&c.hb, "heartbeat", 5*time.Second, "heartbeat interval")
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
func (k *ctl) usage() (time.Duration, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, rss * int64(os.Getpagesize())
}

// conn is a NATS connection shared by agents, with one subscription for
// the replies to all of them (each agent's reply subject is under its own
// inbox prefix, as the controller requires).
type conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	mu      sync.Mutex
	waiting map[string]chan *nats.Msg
	seq     atomic.Int64
}

func (c *conn) request(ctx context.Context, id, subj string, data []byte) (*nats.Msg, error) {
	reply := protocol.InboxPrefix(id) + ".r" + strconv.FormatInt(c.seq.Add(1), 10)
	ch := make(chan *nats.Msg, 1)
	c.mu.Lock()
	c.waiting[reply] = ch
	c.mu.Unlock()
	defer func() { c.mu.Lock(); delete(c.waiting, reply); c.mu.Unlock() }()
	if err := c.nc.PublishRequest(subj, reply, data); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type agent struct {
	id     string
	c      *conn
	reg    atomic.Bool
	cons   atomic.Bool   // its command consumer is started
	cursor atomic.Uint64 // last AX_CMD sequence read
	runs   atomic.Int64  // run commands received
}

type sim struct {
	c             config
	agents        []*agent
	mu            sync.Mutex
	regRTT, hbRTT []time.Duration
	regErr, hbErr atomic.Int64
	consErr       atomic.Int64 // command consumers that failed to start
	badCmds       atomic.Int64
}

func (s *sim) do(ctx context.Context, a *agent, subj string, v interface{ Validate() error }) (*nats.Msg, time.Duration, error) {
	data, err := protocol.Encode(v)
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	m, err := a.c.request(ctx, a.id, subj, data)
	return m, time.Since(t0), err
}

func (s *sim) register(ctx context.Context, a *agent) (time.Duration, error) {
	m, d, err := s.do(ctx, a, protocol.RegisterSubject(a.id), protocol.Register{V: protocol.Version, Agent: a.id,
		Handlers: []string{"noop"}, Version: "sim", OS: "linux", Arch: "arm64", SentAt: time.Now().UTC(), Boot: "sim"})
	if err == nil {
		var r protocol.RegisterReply
		if r, err = protocol.DecodeRegisterReply(m.Data); err == nil && r.Error != "" {
			err = errors.New(r.Error)
			d = max(d, r.RetryAfter.D())
		}
	}
	if err != nil {
		s.regErr.Add(1)
		return d, err
	}
	s.mu.Lock()
	s.regRTT = append(s.regRTT, d)
	s.mu.Unlock()
	a.reg.Store(true)
	return 0, nil
}

// loop registers with capped full-jitter backoff, then heartbeats; a
// failed heartbeat registers again.
func (s *sim) loop(ctx context.Context, a *agent) {
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	fails := 0
	if !sleep(time.Duration(rand.Int64N(int64(s.c.hb)))) {
		return
	}
	for ctx.Err() == nil {
		if !a.reg.Load() {
			if extra, err := s.register(ctx, a); err != nil {
				fails++
				if !sleep(extra + time.Duration(rand.Int64N(int64(min(30*time.Second, time.Second<<min(fails, 5)))))) {
					return
				}
				continue
			}
			fails = 0
		}
		if a.reg.Load() && !a.cons.Load() {
			_ = s.startCommands(ctx, a) // counted; tried again after the next heartbeat
		}
		if !sleep(s.c.hb) {
			return
		}
		m, d, err := s.do(ctx, a, protocol.HeartbeatSubject(a.id), protocol.Heartbeat{V: protocol.Version, Agent: a.id,
			SentAt: time.Now().UTC(), Boot: "sim"})
		if err == nil {
			if r, derr := protocol.DecodeHeartbeatReply(m.Data); derr != nil || r.Error != "" {
				err = errors.New("heartbeat refused")
			}
		}
		if err != nil {
			s.hbErr.Add(1)
			a.reg.Store(false)
			continue
		}
		s.mu.Lock()
		s.hbRTT = append(s.hbRTT, d)
		s.mu.Unlock()
	}
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
	s.regRTT, s.hbRTT = nil, nil
	s.mu.Unlock()
	s.regErr.Store(0)
	s.hbErr.Store(0)
}

func (s *sim) report(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("%s: registrations %d (errors %d) RTT p50 %s p99 %s; heartbeats %d (errors %d) RTT p50 %s p99 %s\n", what,
		len(s.regRTT), s.regErr.Load(), pct(s.regRTT, .5), pct(s.regRTT, .99),
		len(s.hbRTT), s.hbErr.Load(), pct(s.hbRTT, .5), pct(s.hbRTT, .99))
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
		cn := &conn{waiting: map[string]chan *nats.Msg{}}
		cn.nc, err = nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond), nats.RetryOnFailedConnect(true))
		if err != nil {
			return err
		}
		defer cn.nc.Close()
		if cn.js, err = jetstream.New(cn.nc); err != nil {
			return err
		}
		if _, err := cn.nc.Subscribe(protocol.InboxPrefix("*")+".*", func(m *nats.Msg) {
			cn.mu.Lock()
			ch := cn.waiting[m.Subject]
			cn.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
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
		a := &agent{id: fmt.Sprintf("sim-%05d", i), c: conns[i%c.conns]}
		s.agents = append(s.agents, a)
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
	time.Sleep(c.settle)
	s.reset()
	cpu0, _ := k.usage()
	t0 := time.Now()
	time.Sleep(c.meas)
	cpu1, rss := k.usage()
	fmt.Printf("steady %s: controller CPU %.1f%% of a core, RSS %d MiB\n", c.meas,
		100*float64(cpu1-cpu0)/float64(time.Since(t0)), rss>>20)
	s.report("steady")
	api := fmt.Sprintf("http://127.0.0.1:%d", c.apiPort)
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
	for _, a := range s.agents {
		a.reg.Store(false) // the simulated agents re-register as after a reconnect
	}
	s.reset()
	if err := k.start(); err != nil {
		return err
	}
	d, ok = s.waitAll(3 * time.Minute)
	fmt.Printf("after kill -9: all %d re-registered %t within %s of the restart\n", c.agents, ok, d.Round(time.Millisecond))
	s.report("storm")
	if c.runs {
		return s.runsPhase(ctx, "after kill -9", api)
	}
	return nil
}
