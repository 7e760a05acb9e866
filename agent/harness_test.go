package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// ctl is a small controller test double: it answers registrations and
// heartbeats, publishes commands to AX_CMD and reads AX_RPT.
type ctl struct {
	t   testing.TB
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream

	skew atomic.Int64 // controller clock minus real clock
	// hbEvery is the heartbeat interval registrations are told (0: 100ms).
	hbEvery atomic.Int64

	mu       sync.Mutex
	reports  []protocol.Report // received, plus the steps they stand for
	steps    map[string]bool   // msg ids of reports and steps recorded
	msgIDs   map[string]int    // msg ids received
	regs     int
	hbs      int
	lastHB   protocol.Heartbeat
	renew    []protocol.Lease
	consumer jetstream.ConsumeContext
}

// ctlShards is the shard count the controller double tells the agents.
const ctlShards = 4

func startCtl(t testing.TB) *ctl {
	t.Helper()
	srv := natstest.Start(t)
	c := &ctl{t: t, srv: srv, msgIDs: map[string]int{}}
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// No bound per subject: the benchmarks stop the double's reader and
	// fill AX_RPT with one job's reports (TestReportsRefusedPerSubject
	// sets one).
	if _, err := streams.Ensure(ctx, c.js, streams.Config{ReportMaxPerSubject: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	c.subscribe()
	return c
}

func (c *ctl) subscribe() {
	t := c.t
	now := func() time.Time { return time.Now().Add(time.Duration(c.skew.Load())).UTC() }
	if _, err := c.nc.Subscribe(protocol.SubjectRegisterAll, func(m *nats.Msg) {
		if _, err := protocol.DecodeRegister(m.Data); err != nil {
			t.Errorf("controller double: bad registration: %v", err)
			return
		}
		c.mu.Lock()
		c.regs++
		c.mu.Unlock()
		hb := time.Duration(c.hbEvery.Load())
		if hb == 0 {
			hb = 100 * time.Millisecond
		}
		b, _ := protocol.Encode(protocol.RegisterReply{V: protocol.Version, ControllerTime: now(), Shards: ctlShards,
			HeartbeatInterval: protocol.Duration(hb)})
		_ = m.Respond(b)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nc.Subscribe(protocol.SubjectHeartbeatAll, func(m *nats.Msg) {
		hb, err := protocol.DecodeHeartbeat(m.Data)
		if err != nil {
			t.Errorf("controller double: bad heartbeat: %v", err)
			return
		}
		c.mu.Lock()
		c.hbs++
		c.lastHB = hb
		renew := c.renew
		c.mu.Unlock()
		b, _ := protocol.Encode(protocol.HeartbeatReply{V: protocol.Version, ControllerTime: now(), Renewed: renew})
		_ = m.Respond(b)
	}); err != nil {
		t.Fatal(err)
	}
	c.consume()
}

// consume reads AX_RPT (again, after c.consumer.Stop) with the durable
// consumer "ctl", recording and acknowledging every report.
func (c *ctl) consume() {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := c.js.CreateOrUpdateConsumer(ctx, protocol.StreamReports, jetstream.ConsumerConfig{
		Durable: "ctl", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: protocol.SubjectReportsAll})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		r, err := protocol.DecodeReport(m.Data())
		if err != nil {
			t.Errorf("controller double: bad report: %v", err)
		}
		c.mu.Lock()
		c.record(r)
		c.msgIDs[m.Headers().Get(jetstream.MsgIDHeader)]++
		c.mu.Unlock()
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	c.consumer = cc
	t.Cleanup(cc.Stop)
}

// record keeps a report and, like the controller, the steps it stands for
// (a report with TriggeredAt/StartedAt set stands for the triggered and
// running steps not received yet). c.mu is held.
func (c *ctl) record(r protocol.Report) {
	if c.steps == nil {
		c.steps = map[string]bool{}
	}
	key := func(k protocol.ReportKind) string { return protocol.ReportMsgID(r.ExecID, r.Attempt, k) }
	if !r.TriggeredAt.IsZero() && !c.steps[key(protocol.ReportTriggered)] {
		st := protocol.Report{V: r.V, Agent: r.Agent, JobID: r.JobID, ExecID: r.ExecID, Attempt: r.Attempt,
			Kind: protocol.ReportTriggered, ScheduledAt: r.ScheduledAt, At: r.TriggeredAt, Epoch: r.Epoch, Shard: r.Shard}
		c.steps[key(st.Kind)] = true
		c.reports = append(c.reports, st)
	}
	if !r.StartedAt.IsZero() && r.Kind != protocol.ReportRunning && !c.steps[key(protocol.ReportRunning)] {
		st := protocol.Report{V: r.V, Agent: r.Agent, JobID: r.JobID, ExecID: r.ExecID, Attempt: r.Attempt,
			Kind: protocol.ReportRunning, ScheduledAt: r.ScheduledAt, At: r.StartedAt, Epoch: r.Epoch, Shard: r.Shard}
		c.steps[key(st.Kind)] = true
		c.reports = append(c.reports, st)
	}
	c.steps[key(r.Kind)] = true
	c.reports = append(c.reports, r)
}

// send publishes a command to agent id and returns its stream sequence.
func (c *ctl) send(id string, cmd protocol.Command) uint64 {
	c.t.Helper()
	cmd.V, cmd.Agent = protocol.Version, id
	if cmd.IssuedAt.IsZero() {
		cmd.IssuedAt = time.Now().UTC()
	}
	b, err := protocol.Encode(cmd)
	if err != nil {
		c.t.Fatalf("encode command: %v", err)
	}
	return c.sendRaw(id, b)
}

func (c *ctl) sendRaw(id string, b []byte) uint64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := c.js.Publish(ctx, protocol.CommandSubject(id), b)
	if err != nil {
		c.t.Fatalf("publish command: %v", err)
	}
	return ack.Sequence
}

// reportsOf returns the reports of one execution.
func (c *ctl) reportsOf(execID string) []protocol.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return testutil.Filter(c.reports, func(r protocol.Report) bool { return r.ExecID == execID })
}

func (c *ctl) all() []protocol.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Report(nil), c.reports...)
}

func (c *ctl) count(kind protocol.ReportKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(testutil.Filter(c.reports, func(r protocol.Report) bool { return r.Kind == kind }))
}

func (c *ctl) heartbeats() (int, protocol.Heartbeat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hbs, c.lastHB
}

// testConfig is a config for an agent talking to url.
func testConfig(t testing.TB, id, url string) Config {
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.DataDir = t.TempDir()
	cfg.NATS.URL = url
	cfg.NATS.PingInterval = 200 * time.Millisecond
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.NATS.RequestTimeout = time.Second
	cfg.NATS.Heartbeat = 100 * time.Millisecond
	cfg.Shutdown.Grace = 2 * time.Second
	cfg.Store.Synchronous = "normal"
	cfg.Workers = 4
	return cfg
}

// testLogger is the test kit's logger (stderr with AX_TEST_LOG set).
func testLogger(testing.TB) *slog.Logger { return testutil.Logger() }

// startAgent runs an agent until the test ends.
func startAgent(t testing.TB, cfg Config, opts ...Option) *Agent {
	t.Helper()
	opts = append([]Option{WithLogger(testLogger(t))}, opts...)
	a, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("agent did not stop; goroutines:\n%s", stacks.String())
		}
	})
	return a
}

// stallStore stalls a's store writer: a write holds its batch open until
// the returned unstall (also run when the test ends; it may be called more
// than once), and stallStore returns once the writer is inside it.
func stallStore(t testing.TB, a *Agent) (unstall func()) {
	t.Helper()
	release, stalled := make(chan struct{}), make(chan struct{})
	var entered, released sync.Once
	unstall = func() { released.Do(func() { close(release) }) }
	a.st.Submit(func(*store.Tx) error { entered.Do(func() { close(stalled) }); <-release; return nil }, nil)
	t.Cleanup(unstall)
	<-stalled
	return unstall
}

// newStopped builds an agent that is not run (its store is closed when
// the test ends).
func newStopped(t testing.TB, cfg Config, opts ...Option) *Agent {
	t.Helper()
	a, err := New(cfg, append([]Option{WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = a.st.Close() })
	return a
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

// Jobs and commands for the tests (internal/protocoltest).
func newJob(id, handler string, spec schedule.Spec, payload any) protocol.Job {
	return protocoltest.NewJob(id, handler, spec, payload)
}
func runCmd(j protocol.Job, attempt int, at time.Time) protocol.Command {
	return protocoltest.RunCmd(j, attempt, at)
}
func assignCmd(j protocol.Job) protocol.Command { return protocoltest.AssignCmd(j) }

// waitFinished waits up to d for the finished report of execID and
// returns it.
func waitFinished(t testing.TB, c *ctl, d time.Duration, execID string) protocol.Report {
	t.Helper()
	var fin protocol.Report
	waitFor(t, d, "finished report", func() bool {
		var ok bool
		fin, ok = finishedOf(c, execID)
		return ok
	})
	return fin
}

func finishedOf(c *ctl, execID string) (protocol.Report, bool) {
	for _, r := range c.reportsOf(execID) {
		if r.Kind == protocol.ReportFinished {
			return r, true
		}
	}
	return protocol.Report{}, false
}

func tempFile(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ = fmt.Sprint
