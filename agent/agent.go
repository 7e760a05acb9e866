package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/agent/scheduler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// Option changes how New builds an Agent.
type Option func(*options)

type options struct {
	handlers map[string]HandlerFunc
	clk      clock.Clock
	log      *slog.Logger
	version  string
}

// WithHandler registers a Go handler under name (a subject-safe name; "exec"
// and "http" are built in and cannot be replaced).
func WithHandler(name string, fn HandlerFunc) Option {
	return func(o *options) { o.handlers[name] = fn }
}

// WithClock sets the clock every time reading goes through (default clock.Real).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

// WithLogger sets the logger (default: JSON or text on stderr per Config.Log).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithVersion sets the version string sent at registration.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Agent is one edge agent. Build it with New and start it with Run.
type Agent struct {
	cfg      Config
	clk      clock.Clock
	log      *slog.Logger
	version  string
	handlers *handler.Registry
	names    []string
	st       *store.Store

	shards     atomic.Int64
	offset     atomic.Int64 // controller minus agent, ns
	outboxKick chan struct{}
	// lingers counts the flusher's waits for outbox.linger begun.
	lingers atomic.Int64
	// hbKick asks the link for a heartbeat now (a group-job lease to claim).
	hbKick chan struct{}
	// boot names this run of the process in registrations and heartbeats.
	boot string
	// msgSalt prefixes the Nats-Msg-Id of the reports this process
	// enqueues: AX_RPT de-duplicates by Msg-Id across all agents, so a
	// guessable id (exec_id/attempt/kind) would let another agent publish
	// it first and have this agent's report dropped as a duplicate.
	msgSalt string

	sched *scheduler.Scheduler
	ran   atomic.Bool
}

// New validates cfg, opens (and checks) the store and builds the agent. A
// read-only, corrupt or full store is refused here.
func New(cfg Config, opts ...Option) (*Agent, error) {
	o := options{handlers: map[string]HandlerFunc{}, clk: clock.Real{}, version: "dev"}
	for _, fn := range opts {
		fn(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.log == nil {
		o.log = NewLogger(cfg.Log, os.Stderr)
	}
	a := &Agent{cfg: cfg, clk: o.clk, log: o.log.With("agent", cfg.ID), version: o.version,
		outboxKick: make(chan struct{}, 1), hbKick: make(chan struct{}, 1), boot: newBootID(), msgSalt: newBootID()}
	var err error
	if a.handlers, err = newRegistry(cfg, a.clk, o.handlers); err != nil {
		return nil, err
	}
	a.names = a.handlers.Names()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir %s: %w", cfg.DataDir, err)
	}
	a.st, err = store.Open(context.Background(), cfg.StorePath(), store.Options{Synchronous: cfg.Store.Synchronous, MaxBatch: cfg.Store.MaxBatch})
	if err != nil {
		return nil, err
	}
	if err := a.loadMeta(); err != nil {
		_ = a.st.Close()
		return nil, err
	}
	if a.sched, err = scheduler.New(a.schedConfig(), host{a}); err != nil {
		_ = a.st.Close()
		return nil, err
	}
	return a, nil
}

func (a *Agent) loadMeta() error {
	ctx := context.Background()
	id, ok, err := a.st.Meta(ctx, store.MetaAgentID)
	if err != nil {
		return err
	}
	if ok && id != a.cfg.ID {
		return fmt.Errorf("%w: id: the store %s belongs to agent %q, not %q", ErrConfig, a.cfg.StorePath(), id, a.cfg.ID)
	}
	if !ok {
		if err := a.st.Do(ctx, func(tx *store.Tx) error { return tx.SetMeta(store.MetaAgentID, a.cfg.ID) }); err != nil {
			return err
		}
	}
	a.shards.Store(protocol.DefaultShards)
	if v, ok, err := a.st.Meta(ctx, store.MetaShards); err != nil {
		return err
	} else if ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= protocol.MaxShards {
			a.shards.Store(int64(n))
		}
	}
	if v, ok, err := a.st.Meta(ctx, store.MetaClockOffset); err != nil {
		return err
	} else if ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			a.offset.Store(n)
		}
	}
	return nil
}

// Store returns the agent's store (tests and tools read it).
func (a *Agent) Store() *store.Store { return a.st }

// Run runs the agent until ctx is done or the store fails, then shuts down:
// it stops triggering, gives running handlers Shutdown.Grace, flushes the
// outbox (bounded) and closes the store. It returns nil after a clean
// shutdown, or the store's error.
func (a *Agent) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return ErrStopped
	}
	defer a.st.Close()
	a.log.Info("agent starting", "version", a.version, "store", a.cfg.StorePath(), "workers", a.cfg.Workers,
		"nats", a.cfg.NATS.URL, "handlers", a.names, "go", runtime.Version())
	if err := a.sched.Recover(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	// Reports committed from now on are published from memory; those
	// before (an earlier run's) are read from the outbox.
	mem := newMemOutbox(memWindows*a.cfg.Outbox.Window, a.kickOutbox)
	base, err := a.st.SetOutboxSink(context.WithoutCancel(ctx), mem.add)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	mem.setBase(base)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); a.sched.Run(runCtx) }()
	flushCtx, stopFlush := context.WithCancel(context.Background())
	defer stopFlush()
	l := newLink(a)
	l.mem = mem
	fl := newFlusher(a, l, mem)
	wg.Add(1)
	go func() { defer wg.Done(); fl.run(flushCtx) }()
	linkCtx, stopLink := context.WithCancel(context.Background())
	defer stopLink()
	linkDone := make(chan struct{})
	go func() { defer close(linkDone); l.run(linkCtx) }()

	var runErr error
	select {
	case <-ctx.Done():
	case <-a.st.Failed():
		runErr = a.st.Err()
		a.log.Error("store failed; stopping", "err", runErr)
	}
	a.log.Info("agent stopping", "grace", a.cfg.Shutdown.Grace)
	// Stop commands first, then triggering and handlers.
	l.stopCommands()
	cancel()
	<-schedDone
	// Flush what is left while the link is up, bounded (the flusher
	// goroutine is stopped first: one goroutine owns its state).
	stopFlush()
	wg.Wait()
	if runErr == nil {
		fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Every write submitted so far (the last finishes) is durable
		// before the final flush reads the outbox.
		_ = a.st.Do(fctx, func(*store.Tx) error { return nil })
		fl.drain(fctx)
		fcancel()
		// The scheduler has stopped firing: hand the group leases back so
		// that they move to another agent now, not after their TTL.
		l.release(a.sched.ClaimedLeases())
	}
	stopLink()
	<-linkDone
	if err := a.st.Close(); err != nil && runErr == nil {
		runErr = err
	}
	a.log.Info("agent stopped")
	if errors.Is(runErr, context.Canceled) {
		return nil
	}
	return runErr
}

func (a *Agent) kickOutbox() {
	select {
	case a.outboxKick <- struct{}{}:
	default:
	}
}

// encodeReport completes and encodes a report (scheduler.EncodeReport):
// version, agent, At (now unless set) and the step times, all on
// controller-corrected time.
func (a *Agent) encodeReport(r protocol.Report) (scheduler.Report, error) {
	return scheduler.EncodeReport(r, scheduler.Origin{Agent: a.cfg.ID, MsgSalt: a.msgSalt, Shards: int(a.shards.Load()),
		Offset: time.Duration(a.offset.Load()), Now: a.clk.Now})
}

// newBootID returns a random name for this run of the process.
func newBootID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
