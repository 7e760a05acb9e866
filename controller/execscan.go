package controller

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// scanExecsOf reads every execution in the bucket once (one ordered
// consumer pass, not one request per key) and calls fn, on the caller's
// goroutine once the scan has ended, with what pick made of each key's
// latest record as of the end of the scan, in the order the keys were
// first read.
//
// pick runs on the decoding goroutines right after a record is decoded,
// so it must be safe for concurrent use and read nothing that changes
// during the scan; it returns false for a record fn does not want. The
// record itself is dropped there unless pick returns it (inside its
// value): a reload over 300,000 PENDING records keeps only the few it
// checks, and each key's key and revision (about 80 bytes) for the rest,
// instead of every decoded record (about 500). A record pick leaves out,
// a delete or a record that does not decode still counts as its key's
// latest: fn does not see an earlier revision of it.
//
// A watcher's "initial values done" marker is not enough: a key updated
// while the scan runs loses its old message (History 1) and comes again
// as an update after the marker, so a scan that stopped at the marker
// would miss it. The scan goes on until it has read up to the stream's
// last sequence taken at the marker (delete markers are read too, so that
// position is always reached).
//
// Decoding is half the cost of a scan (300,000 PENDING records: about 2 s
// to read and 2 s to decode on one core), so the values are decoded while
// the scan reads on, in batches of scanBatch on up to GOMAXPROCS
// goroutines.
//
// from > 0 reads only the messages from that sequence on (every record
// written since, not each key's latest; reloadindex.go).
func scanExecsOf[T any](ctx context.Context, c *execService, pick func(r *execRecord) (T, bool), fn func(key string, v T, rev uint64), from uint64) error {
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from))
	}
	w, err := c.kv.Execs.WatchAll(ctx, opts...)
	if err != nil {
		return fmt.Errorf("scan executions: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var (
		batches []*scanBatchOf[T]
		cur     = &scanBatchOf[T]{}
		work    = make(chan *scanBatchOf[T], runtime.GOMAXPROCS(0))
		wg      sync.WaitGroup
	)
	for range cap(work) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				b.decode(pick)
			}
		}()
	}
	flush := func() {
		if len(cur.entries) > 0 {
			batches = append(batches, cur)
			work <- cur
			cur = &scanBatchOf[T]{}
		}
	}
	err = c.readExecs(ctx, w, from, func(e jetstream.KeyValueEntry) {
		cur.entries = append(cur.entries, e)
		if len(cur.entries) == scanBatch {
			flush()
		}
	})
	flush()
	close(work)
	wg.Wait()
	if err != nil {
		return err
	}
	// The latest entry of each key wins (a later revision, or a delete).
	type latest struct {
		b *scanBatchOf[T]
		i int32
	}
	total := 0
	for _, b := range batches {
		total += len(b.keys)
	}
	last := make(map[string]latest, total)
	order := make([]string, 0, total)
	for _, b := range batches {
		for i, k := range b.keys {
			if _, ok := last[k]; !ok {
				order = append(order, k)
			}
			last[k] = latest{b, int32(i)}
		}
	}
	for _, k := range order {
		l := last[k]
		if err := l.b.errs[int(l.i)]; err != nil {
			c.log.Error("bad execution record in KV", "key", k, "err", err)
			continue
		}
		if !l.b.picked[l.i] {
			continue // deleted, or left out by pick
		}
		fn(k, l.b.vals[l.i], l.b.revs[l.i])
	}
	return nil
}

// scanBatch is how many entries one decoding goroutine takes at a time.
const scanBatch = 1024

// scanBatchOf is a batch of entries of a scan and, once decoded, their
// keys, revisions and what pick made of their records (picked false: a
// delete, a record left out, or one that did not decode, its error in
// errs).
type scanBatchOf[T any] struct {
	entries []jetstream.KeyValueEntry
	keys    []string
	revs    []uint64
	vals    []T
	picked  []bool
	errs    map[int]error
}

// decode decodes the batch's puts, keeps what pick makes of each, and
// drops the entries and the records, so that a scan of 300,000 records
// does not hold their messages until it ends.
func (b *scanBatchOf[T]) decode(pick func(r *execRecord) (T, bool)) {
	n := len(b.entries)
	b.keys, b.revs = make([]string, n), make([]uint64, n)
	b.vals, b.picked = make([]T, n), make([]bool, n)
	for i, e := range b.entries {
		b.keys[i], b.revs[i] = e.Key(), e.Revision()
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		r, err := decodeExec(e.Value())
		if err != nil {
			if b.errs == nil {
				b.errs = map[int]error{}
			}
			b.errs[i] = err
			continue
		}
		b.vals[i], b.picked[i] = pick(r)
	}
	b.entries = nil
}

// readExecs passes every entry of the watcher w of ax_execs, made to
// start at sequence from (0: each key's latest), to add, until the stream
// position taken at its initial-values marker is read (see scanExecsOf).
func (c *execService) readExecs(ctx context.Context, w jetstream.KeyWatcher, from uint64, add func(jetstream.KeyValueEntry)) error {
	var maxRev, until uint64
	if from > 0 {
		maxRev = from - 1 // nothing before it is to come
	}
	initial := true
	// After the marker, the updates up to `until` follow at once; a stream
	// whose last message was removed outside KV never gets there, so the
	// wait for them is bounded.
	var stall <-chan time.Time
	for initial || maxRev < until {
		select {
		case <-ctx.Done():
			return fmt.Errorf("scan executions: %w", ctx.Err())
		case <-stall:
			c.log.Warn("scan executions: stream position not reached; using what was read", "read_to", maxRev, "last_seq", until)
			until = 0
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("scan executions: watcher stopped")
			}
			if e == nil {
				initial = false
				var err error
				if until, err = c.execsLastSeq(ctx); err != nil {
					return err
				}
				t := time.NewTimer(5 * time.Second)
				defer t.Stop()
				stall = t.C
				continue
			}
			maxRev = max(maxRev, e.Revision())
			add(e)
		}
	}
	return nil
}
