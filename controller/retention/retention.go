package retention

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/histindex"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/pkg/protocol"
)

// Host is what the retention asks of the rest of the controller: a job
// read from ax_jobs, and whether the history index has caught up with
// AX_EVT.
type Host interface {
	// ReadJob reads job id and its revision from ax_jobs (not the
	// cache); a job that does not exist is an error matching
	// ErrJobNotFound.
	ReadJob(ctx context.Context, id string) (protocol.Job, uint64, error)
	// IndexUpToDate waits, for a bounded time, until the history index has
	// applied every event AX_EVT held when it was called, and reports
	// whether it has.
	IndexUpToDate(ctx context.Context) bool
}

// Config is the retention's part of the controller's Config.
type Config struct {
	// Grace is the live grace: how long a terminal execution stays in
	// live state after its last change (reports.dedup_window, the Msg-Id
	// de-duplication window of AX_RPT).
	Grace time.Duration
	// HistoryRetention is how long the history index keeps what left
	// live state (history.retention).
	HistoryRetention time.Duration
	// Sweep is how often the sweeper runs (Loop); 0: every minute.
	Sweep time.Duration
	// Batch bounds the executions a pass reads from the index at once;
	// 0: sweepBatch.
	Batch int
	// Budget bounds how long a pass takes batch after batch of
	// executions before it turns to the jobs; 0: sweepBudget. A pass
	// cut by it is followed by another at once (SweepAll).
	Budget time.Duration
}

// defaultSweep is how often the sweeper runs.
const defaultSweep = time.Minute

// Env is what the retention is given at construction (New): its
// configuration and the controller's plain dependencies.
type Env struct {
	Config Config
	Log    *slog.Logger
	Now    func() time.Time // the clock in UTC, as written to KV
	Mono   func() time.Time // the clock a pass's budget is measured with
	// Every runs step first after first, then every interval, until ctx
	// ends, logging its errors as what.
	Every func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	// Jobs is the controller's job cache: a retired job is removed from
	// it, and its tombstones are pruned once a pass.
	Jobs *jobcache.Cache
	// Own is the shard ownership: the shards whose executions this
	// replica sweeps.
	Own *lease.Ownership
	// Metrics are the controller's metrics the sweeper counts in; a nil
	// field is not counted.
	Metrics Metrics
}

// Metrics are what the sweeper counts: ax_retention_removed_total by kind
// (KindExecution, KindJob) and ax_retention_passes_total by how a pass
// ended (EndedDone, EndedBudget).
type Metrics struct {
	Removed *prometheus.CounterVec
	Passes  *prometheus.CounterVec
}

// The label values of Metrics.
const (
	// KindExecution counts executions removed from ax_execs.
	KindExecution = "execution"
	// KindJob counts one-shot jobs retired from ax_jobs.
	KindJob = "job"
	// EndedDone counts passes that took every execution past the grace.
	EndedDone = "done"
	// EndedBudget counts passes their budget cut with executions past the
	// grace left (Sweeper.Behind): passes ending this way one after the
	// other mean the sweeper runs without a pause and is behind the load.
	EndedBudget = "budget"
)

// count adds n to the counter of label v in vec, if there is one.
func count(vec *prometheus.CounterVec, v string, n int) {
	if vec != nil && n > 0 {
		vec.WithLabelValues(v).Add(float64(n))
	}
}

// Retention moves finished work out of live state into history: the
// terminal executions past the live grace out of ax_execs, the one-shot
// jobs whose executions all left out of ax_jobs (and their idempotency
// keys out of ax_idem), and the history index's rows past the retention.
// Make one with New; the controller gives it its stores with Attach and
// runs Loop.
type Retention struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	mono  func() time.Time
	every func(ctx context.Context, first, interval time.Duration, what string, step func(context.Context) error)
	jobs  *jobcache.Cache
	own   *lease.Ownership
	m     Metrics
	host  Host

	// mu guards deleted: the jobs an operator deleted since the last
	// pass (NoteDeleted), for the next one to look at.
	mu      sync.Mutex
	deleted []string

	// Set by Attach, read-only afterwards.
	js    jetstream.JetStream
	idem  jetstream.KeyValue
	execs execstore.Store
	idx   *histindex.Index
}

// New returns the retention of e, asking host for the rest.
func New(e Env, host Host) *Retention {
	return &Retention{
		cfg: e.Config, log: e.Log, now: e.Now, mono: e.Mono, every: e.Every, m: e.Metrics,
		jobs: e.Jobs, own: e.Own, host: host,
	}
}

// Attach gives the retention the controller's JetStream context, the
// ax_idem bucket, the execution store over ax_execs and the history
// index, before Loop. The execution store's marker TTL (WithMarkerTTL) is
// the one the retention's own purge markers carry: set it where the
// buckets take TTLs (MarkerTTL).
func (c *Retention) Attach(js jetstream.JetStream, idem jetstream.KeyValue, execs execstore.Store, idx *histindex.Index) {
	c.js, c.idem, c.execs, c.idx = js, idem, execs, idx
}

// markerTTL is the TTL the purge markers of the retention carry: the
// execution store's (Attach), 0 when they have none and the next pass
// purges them.
func (c *Retention) markerTTL() time.Duration { return c.execs.MarkerTTL() }

// MarkerTTL is the TTL a purge marker carries where its bucket takes
// per-message TTLs (streams.Buckets.MsgTTL), for a sweeper that runs every
// sweep (Config.Sweep; 0: every minute): one pass, as long as a marker
// stayed when the next pass purged it, so that the replicas' watchers of
// ax_jobs see it; at least a second, the server's least TTL.
func MarkerTTL(sweep time.Duration) time.Duration {
	if sweep <= 0 {
		sweep = defaultSweep
	}
	return max(sweep.Round(time.Second), time.Second)
}

// Sweeper is the state a sweep keeps from one pass to the next: the
// purge markers to purge, the KV streams, and the one-shot jobs still to
// be looked at for retirement. Make one with NewSweeper; one pass at a
// time uses it.
type Sweeper struct {
	markers []pendingMarker
	streams map[string]jetstream.Stream
	// jobs are one-shot jobs some of whose executions left live state,
	// still to be looked at for retirement (retireJob).
	jobs map[string]bool
	// behind is set by a pass that its budget cut with executions past
	// the grace still to remove (Behind).
	behind bool
}

// Behind reports whether the last pass ended on its budget (Config.Budget)
// with executions past the grace left to remove: the sweeper is behind
// the work that leaves live state, and SweepAll goes on with another pass.
func (s *Sweeper) Behind() bool { return s.behind }

// pendingMarker is a purge marker to purge and when (Env.Mono) a pass
// wrote or found it.
type pendingMarker struct {
	execstore.Marker
	at time.Time
}

// NewSweeper returns the state of a sweeper that has made no pass yet.
func NewSweeper() *Sweeper {
	return &Sweeper{streams: map[string]jetstream.Stream{}, jobs: map[string]bool{}}
}

// Loop runs SweepAll every Config.Sweep (after the end of the last) until
// ctx ends.
func (c *Retention) Loop(ctx context.Context) {
	every := c.interval()
	s := NewSweeper()
	c.every(ctx, every, every, "history sweep", func(ctx context.Context) error { return c.SweepAll(ctx, s) })
}

// SweepAll makes a pass (Sweep) and, while the last one ended on its
// budget with executions past the grace left (Sweeper.Behind), another
// straight away, until one takes what is left, nothing more can be
// removed, or ctx ends: a sweeper that waited the full interval after a
// cut pass fell behind a steady dispatch load at the full rate, and live
// state grew (bench/JOURNAL.md, stop 62). The passes after the first purge
// only the markers written a sweep interval or more before (those with a
// TTL leave by themselves), so that a marker is never purged before the
// replicas' watchers of ax_jobs have had an interval to see it.
func (c *Retention) SweepAll(ctx context.Context, s *Sweeper) error {
	if err := c.Sweep(ctx, s); err != nil {
		return err
	}
	for s.behind && ctx.Err() == nil {
		c.purgeMarkers(ctx, s, c.mono().Add(-c.interval()))
		if err := c.sweep(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// interval is how often the sweeper runs: Config.Sweep, or defaultSweep.
func (c *Retention) interval() time.Duration {
	if c.cfg.Sweep > 0 {
		return c.cfg.Sweep
	}
	return defaultSweep
}

// NoteDeleted tells the retention that an operator deleted job id (its
// delete marker is in ax_jobs): the next pass looks at it as at a job
// whose execution left live state, and once every execution of the job
// has, the pass after purges the marker (deletedJobMarker). Safe for
// concurrent use.
func (c *Retention) NoteDeleted(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = append(c.deleted, id)
}

// takeDeleted returns up to n of the jobs NoteDeleted was given and no
// call took yet (a start can note every marker of a large store: the
// passes take them a batch at a time).
func (c *Retention) takeDeleted(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	rest := len(c.deleted) - min(n, len(c.deleted))
	out := c.deleted[rest:]
	c.deleted = c.deleted[:rest:rest] // a later note does not write into out
	return out
}
