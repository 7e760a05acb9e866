package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// execRecord is an execution as stored in KV ax_execs: the public
// Execution plus the report steps already applied to its current attempt,
// which make every report idempotent by (exec_id, attempt, kind).
type execRecord struct {
	protocol.Execution
	// Applied lists the report steps applied to attempt Execution.Attempt,
	// in order; Path[i] is the state step Applied[i] moved the execution
	// to, and From the state before the attempt's first step ("" for none).
	// They let a duplicate report re-publish the events it caused.
	Applied []protocol.ReportKind `json:"applied,omitempty"`
	Path    []protocol.State      `json:"path,omitempty"`
	From    protocol.State        `json:"from,omitempty"`
	// Sent is the attempt whose run command the controller last sent for a
	// retry (to Execution.Agent, under Execution.Epoch); 0 when none was
	// sent since the record was written by a version without it. A new
	// attempt is accepted only from that agent, for that attempt.
	Sent int `json:"sent,omitempty"`
}

// clone returns a deep copy, so that a mutation never touches a cached value.
func (r *execRecord) clone() *execRecord {
	if r == nil {
		return nil
	}
	n := *r
	n.Applied = slices.Clone(r.Applied)
	n.Path = slices.Clone(r.Path)
	if r.Result != nil {
		res := *r.Result
		n.Result = &res
	}
	if r.Shard != nil {
		s := *r.Shard
		n.Shard = &s
	}
	return &n
}

func (r *execRecord) hasApplied(k protocol.ReportKind) bool { return slices.Contains(r.Applied, k) }

func decodeExec(b []byte) (*execRecord, error) {
	var r execRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// execVersion is a record with the KV revision it was read at (0: absent).
type execVersion struct {
	rec *execRecord
	rev uint64
}

// readExec reads an execution; a missing one is (nil, 0, nil).
func (c *Controller) readExec(ctx context.Context, id string) (execVersion, error) {
	e, err := c.kv.Execs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return execVersion{}, nil
	}
	if err != nil {
		return execVersion{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	r, err := decodeExec(e.Value())
	if err != nil {
		return execVersion{}, fmt.Errorf("read execution %s: decode: %w", id, err)
	}
	return execVersion{rec: r, rev: e.Revision()}, nil
}

// errCASConflict is returned by writeExec when the record changed since it was read.
var errCASConflict = errors.New("execution changed concurrently")

// writeExec stores next with compare-and-set against cur (create when
// cur.rev is 0) and returns the new revision.
func (c *Controller) writeExec(ctx context.Context, cur execVersion, next *execRecord) (uint64, error) {
	data, err := json.Marshal(next)
	if err != nil {
		return 0, fmt.Errorf("write execution %s: encode: %w", next.ExecID, err)
	}
	var rev uint64
	if cur.rev == 0 {
		rev, err = c.kv.Execs.Create(ctx, next.ExecID, data)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, errCASConflict
		}
	} else {
		rev, err = c.kv.Execs.Update(ctx, next.ExecID, data, cur.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, errCASConflict
		}
	}
	if err != nil {
		return 0, fmt.Errorf("write execution %s: %w", next.ExecID, err)
	}
	return rev, nil
}

// mutateExec applies fn to the current record of id (nil when absent) and
// writes its result with compare-and-set, re-reading and re-applying on a
// conflict. fn returns (nil, nil) for "no change" and an error to abort.
// The result is the record before and after; after is nil when nothing
// was written.
func (c *Controller) mutateExec(ctx context.Context, id string, fn func(cur *execRecord) (*execRecord, error)) (before, after *execRecord, err error) {
	for range 20 {
		cur, err := c.readExec(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		next, err := fn(cur.rec.clone())
		if err != nil || next == nil {
			return cur.rec, nil, err
		}
		if _, err := c.writeExec(ctx, cur, next); errors.Is(err, errCASConflict) {
			continue
		} else if err != nil {
			return cur.rec, nil, err
		}
		return cur.rec, next, nil
	}
	return nil, nil, fmt.Errorf("execution %s: %w: too much contention", id, ErrConflict)
}

// scanExecs calls fn once for every execution in the bucket, with its
// latest value as of the end of the scan (one ordered consumer pass, not
// one request per key).
//
// A watcher's "initial values done" marker is not enough: a key updated
// while the scan runs loses its old message (History 1) and comes again
// as an update after the marker, so a scan that stopped at the marker
// would miss it. The scan goes on until it has read up to the stream's
// last sequence taken at the marker (delete markers are read too, so that
// position is always reached).
func (c *Controller) scanExecs(ctx context.Context, fn func(r *execRecord, rev uint64)) error {
	w, err := c.kv.Execs.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("scan executions: %w", err)
	}
	defer func() { _ = w.Stop() }()
	type seen struct {
		val []byte
		rev uint64
	}
	latest := map[string]seen{}
	var order []string
	var maxRev, until uint64
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
				if until, err = c.execsLastSeq(ctx); err != nil {
					return err
				}
				t := time.NewTimer(5 * time.Second)
				defer t.Stop()
				stall = t.C
				continue
			}
			maxRev = max(maxRev, e.Revision())
			if e.Operation() != jetstream.KeyValuePut {
				if _, ok := latest[e.Key()]; ok {
					latest[e.Key()] = seen{}
				}
				continue
			}
			if _, ok := latest[e.Key()]; !ok {
				order = append(order, e.Key())
			}
			latest[e.Key()] = seen{val: e.Value(), rev: e.Revision()}
		}
	}
	for _, k := range order {
		v := latest[k]
		if v.val == nil {
			continue // deleted during the scan
		}
		r, err := decodeExec(v.val)
		if err != nil {
			c.log.Error("bad execution record in KV", "key", k, "err", err)
			continue
		}
		fn(r, v.rev)
	}
	return nil
}

// execsLastSeq returns the sequence of the last message the executions
// bucket's stream holds (0 when it holds none). Not the stream's LastSeq:
// the retention sweeper purges keys with their markers (retention.go), so
// the last sequence issued may be gone, and a scan waiting for it would
// wait for its stall timeout.
func (c *Controller) execsLastSeq(ctx context.Context) (uint64, error) {
	st, err := c.js.Stream(ctx, kvStream(protocol.BucketExecs))
	if err != nil {
		return 0, fmt.Errorf("scan executions: %w", err)
	}
	m, err := c.kvGuard.lastMsg(ctx, st, kvSubject(protocol.BucketExecs, ">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("scan executions: %w", err)
	}
	return m.Sequence, nil
}
