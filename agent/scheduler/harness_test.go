package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// testConfig is the agent config's part the scheduler follows, with the
// agent's key names (agent.Config), so that a test reads as it would
// against the agent.
type testConfig struct {
	ID, DataDir string
	Workers     int
	Queue       struct {
		Size      int
		AgingStep time.Duration
	}
	Store struct {
		Retention, PruneInterval time.Duration
	}
	Clock struct {
		MaxSkew, JumpThreshold time.Duration
		OnSkew                 string
	}
	Outbox struct {
		CoalesceSkipped bool
		SkippedWindow   time.Duration
	}
	Shutdown struct{ Grace time.Duration }
}

// SkewAdopt and SkewRefuse are the clock.on_skew values.
const (
	SkewAdopt  = "adopt"
	SkewRefuse = "refuse"
)

// offlineConfig is the agent's default config (agent.DefaultConfig) with
// 4 workers and one SKIPPED row per fire, written at once (these tests
// look at the rows of single fires; coalescing has its own test).
func offlineConfig(t testing.TB, id string) testConfig {
	c := testConfig{ID: id, DataDir: t.TempDir(), Workers: 4}
	c.Queue.Size, c.Queue.AgingStep = 1024, 500*time.Millisecond
	c.Store.Retention, c.Store.PruneInterval = 24*time.Hour, 10*time.Minute
	c.Clock.MaxSkew, c.Clock.JumpThreshold, c.Clock.OnSkew = 2*time.Second, time.Second, SkewRefuse
	c.Shutdown.Grace = 2 * time.Second
	return c
}

// testHost is the agent's side of the seam, as the agent does it
// (EncodeReport with a fixed salt and 4 shards), counting its kicks.
type testHost struct {
	id      string
	clk     clock.Clock
	offset  atomic.Int64
	kicks   atomic.Int64
	hbKick  chan struct{}
	encoded atomic.Int64
}

func (h *testHost) ClockOffset() time.Duration { return time.Duration(h.offset.Load()) }

func (h *testHost) EncodeReport(r protocol.Report) (Report, error) {
	h.encoded.Add(1)
	return EncodeReport(r, Origin{Agent: h.id, MsgSalt: "test", Shards: 4, Offset: h.ClockOffset(), Now: h.clk.Now})
}

func (h *testHost) KickOutbox() { h.kicks.Add(1) }

func (h *testHost) KickHeartbeat() {
	select {
	case h.hbKick <- struct{}{}:
	default:
	}
}

// offline is a scheduler that is not Run: the test goroutine owns it and
// drives it on a fake clock. Commands go through Apply and the real store;
// fires are made by calling fire with the wheel item the wheel would
// deliver at the job's next fire time.
type offline struct {
	t    testing.TB
	s    *Scheduler
	st   *store.Store
	host *testHost
	clk  *clock.Fake
	cfg  testConfig
	seq  uint64
}

func newOffline(t testing.TB, cfg testConfig, start time.Time) *offline {
	t.Helper()
	clk := clock.NewFake(start)
	st, err := store.Open(context.Background(), filepath.Join(cfg.DataDir, "agent.db"), store.Options{Synchronous: "normal"})
	must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	reg := handler.NewRegistry()
	must(t, reg.Register("noop", func(context.Context, handler.Task) handler.Result { return handler.Result{} }))
	host := &testHost{id: cfg.ID, clk: clk, hbKick: make(chan struct{}, 1)}
	s, err := New(Config{AgentID: cfg.ID, Store: st, Clock: clk, Handlers: reg, Log: testLogger(t),
		Workers: cfg.Workers, QueueSize: cfg.Queue.Size, AgingStep: cfg.Queue.AgingStep, SlowStartFraction: 2,
		Grace: cfg.Shutdown.Grace, Retention: cfg.Store.Retention, PruneInterval: cfg.Store.PruneInterval,
		JumpThreshold: cfg.Clock.JumpThreshold, MaxSkew: cfg.Clock.MaxSkew, AdoptSkew: cfg.Clock.OnSkew == SkewAdopt,
		CoalesceSkipped: cfg.Outbox.CoalesceSkipped, SkippedWindow: cfg.Outbox.SkippedWindow}, host)
	must(t, err)
	return &offline{t: t, s: s, st: st, host: host, clk: clk, cfg: cfg}
}

// apply applies a command and handles what it posted to the scheduler.
func (o *offline) apply(cmd protocol.Command) {
	o.t.Helper()
	cmd.V, cmd.Agent, cmd.IssuedAt = protocol.Version, o.cfg.ID, o.clk.Now().UTC()
	data, err := protocol.Encode(cmd)
	must(o.t, err)
	o.seq++
	done := make(chan error, 1)
	o.s.Apply(o.seq, data, func(err error) { done <- err })
	must(o.t, <-done)
	o.s.drainAll()
}

// sync handles what is posted (the batched fires' write), waits until
// every write submitted so far is durable and handles what their
// callbacks posted.
func (o *offline) sync() {
	o.t.Helper()
	o.s.drainAll()
	must(o.t, o.st.Do(context.Background(), func(*store.Tx) error { return nil }))
	o.s.drainAll()
}

// fireNext moves the clock to the job's next fire and delivers its wheel
// item; it returns the fire time.
func (o *offline) fireNext(jobID string) time.Time {
	o.t.Helper()
	j := o.s.jobs.byID[jobID]
	if j == nil || j.assigned == nil || j.assigned.next.IsZero() {
		o.t.Fatalf("job %s has no planned fire", jobID)
	}
	aj := j.assigned
	at := aj.next
	o.clk.Set(o.s.trig.deadline(at))
	o.s.trig.fire(wheelItem{id: aj.ref, seq: uint32(aj.planSeq), prio: uint8(aj.job.Priority)})
	o.sync()
	return at
}

// row returns the attempt of exec id (attempt 1), or false.
func (o *offline) row(execID string) (store.Exec, bool) {
	o.t.Helper()
	e, err := o.st.ExecByID(context.Background(), execID, 1)
	if errors.Is(err, store.ErrNotFound) {
		return store.Exec{}, false
	}
	must(o.t, err)
	return e, true
}

// heldLeases lists the leases the scheduler holds now.
func (o *offline) heldLeases() []protocol.HeldLease { return o.s.jobs.held(o.clk.Now()) }

func groupJob(id string, every string, mode string) protocol.Job {
	j := protocoltest.NewJob(id, "noop", schedule.Spec{Every: every}, nil)
	j.Target = protocol.Target{Group: "site=a", Mode: mode}
	j.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return j
}

// testLogger is the test kit's logger (stderr with AX_TEST_LOG set).
func testLogger(testing.TB) *slog.Logger { return testutil.Logger() }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
