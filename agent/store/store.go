package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/pkg/clock"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Synchronous modes (PRAGMA synchronous) accepted by Options.
const (
	SyncFull   = "full"
	SyncNormal = "normal"
)

// Defaults of Options.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultMaxBatch    = 512
	DefaultCacheKiB    = 1024
	DefaultQueue       = 4096
	// DefaultReadCacheKiB is the page cache of a read connection. Reads
	// are few and small (outbox pages, reloads, counts) and miss into the
	// OS page cache, so a reader needs far less than the writer, whose
	// cache holds the b-tree pages every batch touches.
	DefaultReadCacheKiB = 256
	// DefaultReaders is the number of read connections. Every read
	// collects its rows before returning, so one connection never
	// deadlocks; each extra one costs its own page cache and schema.
	DefaultReaders = 1
	// DefaultLinger is Options.Linger.
	DefaultLinger = time.Millisecond
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// Synchronous is SyncFull (default) or SyncNormal.
	Synchronous string
	// BusyTimeout is how long a statement waits for a lock.
	BusyTimeout time.Duration
	// MaxBatch bounds how many write functions share one transaction.
	MaxBatch int
	// CacheKiB is the page cache of the write connection, in KiB.
	CacheKiB int
	// ReadCacheKiB is the page cache of each read connection, in KiB.
	ReadCacheKiB int
	// Readers is the number of read connections.
	Readers int
	// Queue is the capacity of the write queue; Submit blocks beyond it.
	Queue int
	// Linger bounds how long the writer waits for more write functions
	// before it starts a batch while writes keep coming (see writer);
	// negative: never wait.
	Linger time.Duration
	// AckDelay bounds how long outbox rows acknowledged with AckLater wait
	// for another write's commit to delete them before the writer commits
	// their delete alone.
	AckDelay time.Duration
	// Clock times the writer's batches, its linger and AckDelay, and dates
	// the open probe (nil: clock.Real).
	Clock clock.Clock
}

func (o Options) withDefaults() Options {
	if o.Synchronous == "" {
		o.Synchronous = SyncFull
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.CacheKiB <= 0 {
		o.CacheKiB = DefaultCacheKiB
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.ReadCacheKiB <= 0 {
		o.ReadCacheKiB = DefaultReadCacheKiB
	}
	if o.Readers <= 0 {
		o.Readers = DefaultReaders
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.AckDelay <= 0 {
		o.AckDelay = DefaultAckDelay
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// Store is the agent's SQLite file. Safe for concurrent use.
type Store struct {
	path string
	opts Options
	wdb  *sql.DB // one connection, used only by the writer goroutine
	rdb  *sql.DB // readers
	st   *stmts
	// stats counts commits, write functions and outbox reads.
	stats stats
	// w is the writer goroutine's state (writer.go).
	w *writer

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	reqs   chan req
	done   chan struct{} // writer exited

	errMu  sync.Mutex
	err    error
	failed chan struct{}
}

type req struct {
	fn   func(*Tx) error
	done func(error)
}

// Open opens (creating if needed) the database at path, checks it, migrates
// its schema and starts the writer. A read-only, corrupt or unopenable file
// is refused with an error wrapping ErrReadOnly, ErrCorrupt or ErrCantOpen.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	o = o.withDefaults()
	switch o.Synchronous {
	case SyncFull, SyncNormal:
	default:
		return nil, fmt.Errorf("store: synchronous: must be %q or %q, got %q", SyncFull, SyncNormal, o.Synchronous)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("open store %s: %w: directory %s does not exist", path, ErrCantOpen, filepath.Dir(path))
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 && fi.Size() < 100 {
		return nil, fmt.Errorf("open store %s: %w: file of %d bytes is not a SQLite database", path, ErrCorrupt, fi.Size())
	}
	s := &Store{path: path, opts: o, reqs: make(chan req, o.Queue), done: make(chan struct{}), failed: make(chan struct{})}
	var err error
	s.wdb, err = sql.Open("sqlite", dsn(path, o, false))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, classify(err))
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	if err := s.check(ctx); err != nil {
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.rdb, err = sql.Open("sqlite", dsn(path, o, true))
	if err != nil {
		_ = s.wdb.Close()
		return nil, fmt.Errorf("open store %s: %w", path, classify(err))
	}
	s.rdb.SetMaxOpenConns(o.Readers)
	s.rdb.SetMaxIdleConns(o.Readers)
	var outboxSeq int64
	if err := s.wdb.QueryRowContext(ctx, `SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0),
		COALESCE((SELECT MAX(seq) FROM outbox), 0))`).Scan(&outboxSeq); err != nil {
		_ = s.wdb.Close()
		_ = s.rdb.Close()
		return nil, fmt.Errorf("open store %s: read outbox seq: %w", path, classify(err))
	}
	if s.st, err = prepare(ctx, s.wdb); err != nil {
		_ = s.wdb.Close()
		_ = s.rdb.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.w = &writer{db: s.wdb, st: s.st, opts: s.opts, path: s.path, stats: &s.stats, reqs: s.reqs, done: s.done,
		err: s.Err, fail: s.fail, outboxSeq: outboxSeq, ackKick: make(chan struct{}, 1)}
	go s.w.run()
	return s, nil
}

func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+strings.ToUpper(o.Synchronous)+")")
	q.Add("_pragma", "temp_store(MEMORY)")
	if readOnly {
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", o.ReadCacheKiB))
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", o.CacheKiB))
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// check verifies WAL mode, integrity and writability, and migrates.
func (s *Store) check(ctx context.Context) error {
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return classify(err)
	}
	if !strings.EqualFold(mode, "wal") {
		// SQLite keeps the old mode when it cannot create the -wal file.
		return fmt.Errorf("%w: journal_mode is %q, not wal (directory not writable?)", ErrReadOnly, mode)
	}
	var res string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return classify(err)
	}
	if res != "ok" {
		return fmt.Errorf("%w: quick_check: %s", ErrCorrupt, res)
	}
	if err := migrate(ctx, s.wdb); err != nil {
		return err
	}
	// A write probe: a read-only file that is already migrated fails here.
	if _, err := s.wdb.ExecContext(ctx, "INSERT OR REPLACE INTO meta(key, value) VALUES ('opened_at', ?)",
		s.opts.Clock.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("write probe: %w", classify(err))
	}
	return nil
}

// Err returns the error that failed the store, or nil.
func (s *Store) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Failed is closed when a write hit an error that makes the store unusable
// (read-only, corrupt, full, I/O); Err says which.
func (s *Store) Failed() <-chan struct{} { return s.failed }

func (s *Store) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
}

// Do runs fn in a group-committed write transaction and returns once the
// transaction is durable (or failed). fn may be run more than once (a batch
// is retried function by function when one of them fails), so it must only
// change the database and its own result variables. An error returned by fn
// rolls back fn's changes only.
func (s *Store) Do(ctx context.Context, fn func(*Tx) error) error {
	ch := make(chan error, 1)
	if err := s.submit(ctx, fn, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// The write may still commit; the caller must not assume it did not.
		return ctx.Err()
	}
}

// Submit queues fn like Do but does not wait: done is called with the
// outcome from the writer goroutine once the batch is durable. done must
// be quick and must not call Do. Submit blocks while the queue is full.
func (s *Store) Submit(fn func(*Tx) error, done func(error)) {
	if err := s.submit(context.Background(), fn, done); err != nil && done != nil {
		done(err)
	}
}

// TrySubmit queues fn like Submit unless the write queue is full; it
// reports whether fn was queued (done is called only then).
func (s *Store) TrySubmit(fn func(*Tx) error, done func(error)) bool {
	if s.Err() != nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false
	}
	select {
	case s.reqs <- req{fn: fn, done: done}:
		return true
	default:
		return false
	}
}

func (s *Store) submit(ctx context.Context, fn func(*Tx) error, done func(error)) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.reqs <- req{fn: fn, done: done}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting writes, commits what is queued and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()
	<-s.done
	s.st.close()
	err := errors.Join(s.rdb.Close(), s.wdb.Close())
	if err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

func safeRun(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: write function panicked: %v", p)
		}
	}()
	return fn(tx)
}
