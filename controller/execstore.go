package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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

// scanExecs calls fn for every execution in the bucket (one ordered
// consumer pass, not one request per key).
func (c *Controller) scanExecs(ctx context.Context, fn func(r *execRecord, rev uint64)) error {
	w, err := c.kv.Execs.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("scan executions: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil
			}
			r, err := decodeExec(e.Value())
			if err != nil {
				c.log.Error("bad execution record in KV", "key", e.Key(), "err", err)
				continue
			}
			fn(r, e.Revision())
		}
	}
}
