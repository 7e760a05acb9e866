package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/pkg/protocol"
)

// execRecord is an execution as stored in KV ax_execs (execution.Record).
type execRecord = execution.Record

func decodeExec(b []byte) (*execRecord, error) { return execution.Decode(b) }

// execVersion is a record with the KV revision it was read at (0: absent).
type execVersion struct {
	rec *execRecord
	rev uint64
}

// execStore is the one writer of KV ax_execs. Every record written — by
// the API, the retries, the lease code and the report lanes alike — goes
// through put (a synchronous compare-and-set) or putAsync (a pipelined
// one: an asynchronous publish with the expected last sequence of the
// key's subject, whose acks a report lane collects per batch), and every
// removal through retire. Nothing else publishes on $KV.ax_execs.>
// (TestOneExecWriter). It is a value over the controller's current bucket
// (execs), which a store reset may replace.
type execStore struct {
	kv jetstream.KeyValue // ax_execs
	js jetstream.JetStream
}

// execs returns the execution store over the current ax_execs bucket.
func (c *execService) execs() execStore { return execStore{kv: c.kv.Execs, js: c.js} }

// readExec reads an execution; a missing one is (nil, 0, nil).
func (c *execService) readExec(ctx context.Context, id string) (execVersion, error) {
	return c.execs().get(ctx, id)
}

// get reads an execution; a missing one is (nil, 0, nil).
func (s execStore) get(ctx context.Context, id string) (execVersion, error) {
	e, err := s.kv.Get(ctx, id)
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

// errCASConflict is returned by the store's writes when the record changed
// since it was read.
var errCASConflict = errors.New("execution changed concurrently")

// put stores next with compare-and-set against cur (create when cur.rev
// is 0) and returns the new revision.
func (s execStore) put(ctx context.Context, cur execVersion, next *execRecord) (uint64, error) {
	data, err := json.Marshal(next)
	if err != nil {
		return 0, fmt.Errorf("write execution %s: encode: %w", next.ExecID, err)
	}
	var rev uint64
	if cur.rev == 0 {
		rev, err = s.kv.Create(ctx, next.ExecID, data)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, errCASConflict
		}
	} else {
		rev, err = s.kv.Update(ctx, next.ExecID, data, cur.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, errCASConflict
		}
	}
	if err != nil {
		return 0, fmt.Errorf("write execution %s: %w", next.ExecID, err)
	}
	return rev, nil
}

// pendingPut is a write of putAsync in flight.
type pendingPut struct {
	id  string
	fut jetstream.PubAckFuture
	err error
}

// putAsync publishes next to its key with compare-and-set on the revision
// cur was read at (0: the key must have no message), without waiting: the
// caller issues the writes of a batch, then waits for each (wait). A key
// whose last message is a delete or purge marker fails as a conflict here;
// put (a KV create) handles it.
func (s execStore) putAsync(cur execVersion, next *execRecord) *pendingPut {
	p := &pendingPut{id: next.ExecID}
	data, err := json.Marshal(next)
	if err != nil {
		p.err = fmt.Errorf("write execution %s: encode: %w", next.ExecID, err)
		return p
	}
	m := &nats.Msg{Subject: kvSubject(protocol.BucketExecs, next.ExecID), Data: data, Header: nats.Header{}}
	p.fut, p.err = s.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(cur.rev), jetstream.WithStallWait(asyncStallWait))
	if p.err != nil {
		p.err = fmt.Errorf("write execution %s: %w", next.ExecID, p.err)
	}
	return p
}

// wait returns the revision the write was stored at, errCASConflict when
// the record changed since it was read, or why it failed.
func (p *pendingPut) wait(ctx context.Context) (uint64, error) {
	if p.err != nil {
		return 0, p.err
	}
	select {
	case ack := <-p.fut.Ok():
		return ack.Sequence, nil
	case err := <-p.fut.Err():
		if isWrongLastSeq(err) {
			return 0, errCASConflict
		}
		return 0, fmt.Errorf("write execution %s: %w", p.id, err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// retire removes execution id from ax_execs (execution.Retire): a purge
// marker published with compare-and-set on rev (the record goes with it),
// returned so that the sweeper purges the subject up to it on its next
// pass. A lost compare-and-set is errCASConflict.
func (s execStore) retire(ctx context.Context, id string, rev uint64) (*marker, error) {
	m := nats.NewMsg(kvSubject(protocol.BucketExecs, id))
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	if isWrongLastSeq(err) {
		return nil, errCASConflict
	}
	if err != nil {
		return nil, fmt.Errorf("retire execution %s: %w", id, err)
	}
	return &marker{stream: kvStream(protocol.BucketExecs), subject: m.Subject, seq: ack.Sequence}, nil
}

// execsLastSeq returns the sequence of the last message the executions
// bucket's stream holds (0 when it holds none). Not the stream's LastSeq:
// the retention sweeper purges keys with their markers (retention.go), so
// the last sequence issued may be gone, and a scan waiting for it would
// wait for its stall timeout.
func (c *execService) execsLastSeq(ctx context.Context) (uint64, error) {
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
