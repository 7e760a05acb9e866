package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/pkg/protocol"
)

// Change is one stored change of a job: Old nil for a create, Next nil
// for a delete, both set for an update (pause and resume included).
type Change struct {
	Old  *protocol.Job
	Next *protocol.Job
	// Rev is the revision ax_jobs stored the change at (of a delete, a
	// lower bound: the revision it replaced plus one). Host.Dispatch
	// sends the commands toward a newer version of the job when it knows
	// one (the change was overtaken).
	Rev uint64
}

// JobID returns the id of the changed job.
func (ch Change) JobID() string {
	if ch.Next != nil {
		return ch.Next.ID
	}
	if ch.Old != nil {
		return ch.Old.ID
	}
	return ""
}

// check says whether ch holds together: at least one side, one job id on
// both, and a next generation after the old one.
func (ch Change) check() error {
	switch {
	case ch.Old == nil && ch.Next == nil:
		return fmt.Errorf("%w: old, next: a change needs at least one of them", ErrBadRequest)
	case ch.Rev == 0:
		return fmt.Errorf("%w: rev: a change needs the revision it was stored at", ErrBadRequest)
	case ch.Old != nil && ch.Next != nil && ch.Old.ID != ch.Next.ID:
		return fmt.Errorf("%w: next.id: %q, but old.id is %q", ErrBadRequest, ch.Next.ID, ch.Old.ID)
	case ch.Old != nil && ch.Next != nil && ch.Next.Generation <= ch.Old.Generation:
		return fmt.Errorf("%w: next.generation: %d, not after old.generation %d", ErrBadRequest, ch.Next.Generation, ch.Old.Generation)
	}
	return nil
}

// Host is what the driver asks of the controller.
type Host interface {
	// Dispatch sends the commands of a stored change, toward the newest
	// version of the job it knows (a change overtaken by a later one
	// never sends an older generation): the assignment diff of a periodic job, the PENDING executions of a one-shot job
	// and their runs, the unassigns and cancels of a delete. It is
	// idempotent (the agents order commands by generation; an
	// execution's id is fixed by its fire), so a change sent twice does no
	// harm, and it makes the writes it starts to the end even when ctx is
	// cancelled.
	Dispatch(ctx context.Context, ch Change)
}

// Owner says who works a job's shard (lease.Ownership).
type Owner interface {
	// OwnsJob reports whether this replica works the shard of job id now.
	OwnsJob(id string) bool
	// OwnerInstance returns the process instance holding the lease of
	// job id's shard as last seen, "" when no live lease is known.
	OwnerInstance(id string) string
}

// Route is the way Drive sent a change.
type Route string

// The routes of Drive, also the label values of Metrics.Changes.
const (
	// RouteLocal: this replica works the job's shard and sent the commands.
	RouteLocal Route = "local"
	// RouteForwarded: the replica working the job's shard sent them.
	RouteForwarded Route = "forwarded"
	// RouteFallback: no owner took the change (none known, unreachable,
	// refused, too slow); this replica sent the commands itself.
	RouteFallback Route = "fallback"
	// RouteServed: this replica sent them for another that asked (Serve).
	RouteServed Route = "served"
)

// Defaults of Config.Timeout and Config.Hold (the controller's
// forward.timeout and forward.hold).
const (
	DefaultTimeout = 5 * time.Second
	DefaultHold    = 30 * time.Second
)

// Config tunes a Driver. Zero values take the defaults.
type Config struct {
	// Instance is this process's instance, as its shard leases name it.
	Instance string
	// Timeout bounds how long Drive waits for the owner's reply before it
	// sends the commands itself; default 5s. An owner answers in
	// milliseconds; one cut off without its connection closing (a link
	// cut) holds the API call this long.
	Timeout time.Duration
	// Hold is how long, after a replica did not answer within Timeout,
	// Drive sends the changes of the shards it works without asking it
	// (RouteFallback at once, ErrNotAsked), while the leases still name
	// it; default 30s. So a frozen owner holds one API call for Timeout,
	// not every call until its leases lapse (lease_ttl) and another
	// replica takes its shards. An answer after the hold asks it again.
	Hold time.Duration
	// Workers is how many changes a replica sends at once for others;
	// default 8. Queue is how many more wait; default 256. A request
	// beyond both is refused busy (its sender sends it itself).
	Workers, Queue int
}

// Env is what a Driver is built from.
type Env struct {
	Config Config
	Log    *slog.Logger
	// Count, when set, is called once per change with its route (the
	// controller's ax_job_changes_total).
	Count func(Route)
	Owner Owner
	// GoRun runs a goroutine the controller's shutdown waits for.
	GoRun func(func(context.Context))
	// Mono reads the monotonic clock for Config.Hold; time.Now when nil.
	Mono func() time.Time
}

// Driver is the one path from a stored job change to the agents'
// commands (see the package doc).
type Driver struct {
	cfg   Config
	log   *slog.Logger
	count func(Route)
	own   Owner
	goRun func(func(context.Context))
	host  Host
	mono  func() time.Time

	mu     sync.Mutex
	silent map[string]time.Time // instance → until when it is not asked (Config.Hold)

	nc    atomic.Pointer[nats.Conn] // set by Serve
	work  chan served
	alive atomic.Bool // Serve's workers run
}

// served is a request taken by Serve, waiting for a worker.
type served struct {
	ch  Change
	msg *nats.Msg
}

// New returns the driver of env, sending through host. It does no I/O;
// until Serve, every change is sent locally.
func New(env Env, host Host) *Driver {
	cfg := env.Config
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Hold <= 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 256
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	count := env.Count
	if count == nil {
		count = func(Route) {}
	}
	mono := env.Mono
	if mono == nil {
		mono = time.Now
	}
	return &Driver{cfg: cfg, log: log, count: count, own: env.Owner, goRun: env.GoRun, host: host, mono: mono,
		silent: map[string]time.Time{}, work: make(chan served, cfg.Queue)}
}

// Config returns the driver's configuration, defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// Local reports whether Drive would send a change of job id from this
// replica without asking another: it works the job's shard, no other
// live replica is known to, or the one that does was silent lately
// (Config.Hold).
func (d *Driver) Local(id string) bool {
	inst, local := d.owner(id)
	return local || d.isSilent(inst)
}

// isSilent reports whether replica inst is within the hold after it did
// not answer (Config.Hold).
func (d *Driver) isSilent(inst string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.silent[inst]
	if ok && !d.mono().Before(until) {
		delete(d.silent, inst)
		return false
	}
	return ok
}

// markSilent starts the hold of replica inst (Config.Hold).
func (d *Driver) markSilent(inst string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.silent[inst] = d.mono().Add(d.cfg.Hold)
}

// owner returns the instance to ask for job id's changes, or local when
// this replica sends them (Local).
func (d *Driver) owner(id string) (inst string, local bool) {
	if d.own.OwnsJob(id) || d.nc.Load() == nil {
		return "", true
	}
	inst = d.own.OwnerInstance(id)
	return inst, inst == "" || inst == d.cfg.Instance
}

// Drive sends the commands of stored change ch: from this replica when it
// works the job's shard (RouteLocal), else by asking the replica that
// does and waiting for its reply (RouteForwarded). When no owner is
// known, or the owner does not answer within Config.Timeout or refuses,
// this replica sends them itself (RouteFallback) and the error says why
// the owner did not; the commands went out all the same. An owner that
// did not answer in time (ErrSilent) is not asked again for Config.Hold
// (ErrNotAsked).
func (d *Driver) Drive(ctx context.Context, ch Change) (Route, error) {
	inst, local := d.owner(ch.JobID())
	if local {
		d.host.Dispatch(ctx, ch)
		d.count(RouteLocal)
		return RouteLocal, nil
	}
	var err error
	if d.isSilent(inst) {
		err = fmt.Errorf("send the commands of job %s: %w: replica %s did not answer within %s", ch.JobID(), ErrNotAsked, inst, d.cfg.Timeout)
	} else if err = d.forward(ctx, inst, ch); err == nil {
		d.count(RouteForwarded)
		return RouteForwarded, nil
	} else if errors.Is(err, ErrSilent) {
		d.markSilent(inst)
	}
	d.host.Dispatch(ctx, ch)
	d.count(RouteFallback)
	return RouteFallback, err
}

// forward asks replica inst to send ch's commands and waits for its reply.
func (d *Driver) forward(ctx context.Context, inst string, ch Change) error {
	nc := d.nc.Load()
	if inst == "" || nc == nil {
		return fmt.Errorf("%w: no replica works the shard of job %s", ErrRefused, ch.JobID())
	}
	data, err := EncodeRequest(ch)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, Subject(inst), data)
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		// Our own bound passed, not the caller's: the owner is silent.
		return fmt.Errorf("ask replica %s to send the commands of job %s: %w within %s: %w", inst, ch.JobID(), ErrSilent, d.cfg.Timeout, err)
	}
	if err != nil {
		return fmt.Errorf("ask replica %s to send the commands of job %s: %w", inst, ch.JobID(), err)
	}
	r, err := DecodeReply(m.Data)
	if err != nil {
		return fmt.Errorf("ask replica %s: %w", inst, err)
	}
	if !r.Done {
		return fmt.Errorf("ask replica %s to send the commands of job %s: %w: %s", inst, ch.JobID(), ErrRefused, r.Refused)
	}
	return nil
}

// Serve answers the drive requests of other replicas on
// Subject(Config.Instance) through nc, with Config.Workers workers run by
// Env.GoRun until ctx ends, and lets Drive forward from then on. When it
// returns the server has the subscription. The caller unsubscribes the
// subscription returned at shutdown.
func (d *Driver) Serve(ctx context.Context, nc *nats.Conn) (*nats.Subscription, error) {
	if d.cfg.Instance == "" {
		return nil, errors.New("serve drive requests: no instance")
	}
	for range d.cfg.Workers {
		d.goRun(d.worker)
	}
	d.alive.Store(true)
	sub, err := nc.Subscribe(Subject(d.cfg.Instance), d.take)
	if err != nil {
		return nil, fmt.Errorf("serve drive requests: %w", err)
	}
	// The server has the subscription when Serve returns: a request
	// published after it (by any connection) reaches it.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("serve drive requests: %w", err)
	}
	d.nc.Store(nc)
	return sub, nil
}

// take is the subscription's handler: it checks a request and queues it
// for a worker, or refuses it at once.
func (d *Driver) take(m *nats.Msg) {
	ch, err := DecodeRequest(m.Data)
	switch {
	case err != nil:
		d.log.Warn("drive request refused", "subject", m.Subject, "err", err)
		d.reply(m, Reply{Refused: ReasonInvalid})
		return
	case !d.alive.Load():
		d.reply(m, Reply{Refused: ReasonStopping})
		return
	case !d.own.OwnsJob(ch.JobID()):
		d.reply(m, Reply{Refused: ReasonNotOwner})
		return
	}
	select {
	case d.work <- served{ch: ch, msg: m}:
	default:
		d.reply(m, Reply{Refused: ReasonBusy})
	}
}

// worker sends the changes take queued, until ctx ends; what is still
// queued then is refused (its senders send it themselves).
func (d *Driver) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			d.alive.Store(false)
			for {
				select {
				case s := <-d.work:
					d.reply(s.msg, Reply{Refused: ReasonStopping})
				default:
					return
				}
			}
		case s := <-d.work:
			if !d.own.OwnsJob(s.ch.JobID()) { // the shard moved while it waited
				d.reply(s.msg, Reply{Refused: ReasonNotOwner})
				continue
			}
			d.host.Dispatch(ctx, s.ch)
			d.count(RouteServed)
			d.reply(s.msg, Reply{Done: true})
		}
	}
}

// reply answers m; a reply that cannot be sent leaves the sender to its
// timeout, after which it sends the change itself.
func (d *Driver) reply(m *nats.Msg, r Reply) {
	if m.Reply == "" {
		return
	}
	_ = m.Respond(EncodeReply(r))
}
