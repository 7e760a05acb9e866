package execstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// Version is a record with the KV revision it was read at (0: absent).
type Version struct {
	Rec *execution.Record
	Rev uint64
}

// Store is the one writer of KV ax_execs: a value over one bucket handle
// (the controller makes one per use, so that a store reset that replaces
// the bucket is seen by the next).
type Store struct {
	kv        jetstream.KeyValue // ax_execs
	js        jetstream.JetStream
	stallWait time.Duration // how long an async publish may wait for room
	markerTTL time.Duration // the TTL of Retire's purge markers; 0: none
}

// New returns the store over bucket kv (ax_execs) of js; stallWait bounds
// how long PutAsync waits when too many publishes are in flight.
func New(kv jetstream.KeyValue, js jetstream.JetStream, stallWait time.Duration) Store {
	return Store{kv: kv, js: js, stallWait: stallWait}
}

// WithMarkerTTL returns the store with the purge markers of Retire
// carrying per-message TTL d (ax_execs must take TTLs:
// streams.Buckets.MsgTTL): each leaves the stream by itself after d, and
// Retire returns no marker to purge. d is whole seconds, at least one (the
// server's least TTL); 0 leaves them without.
func (s Store) WithMarkerTTL(d time.Duration) Store {
	s.markerTTL = d
	return s
}

// MarkerTTL is the TTL of Retire's purge markers (WithMarkerTTL); 0 when
// they have none and must be purged.
func (s Store) MarkerTTL() time.Duration { return s.markerTTL }

// Get reads an execution; a missing one is (nil, 0, nil).
func (s Store) Get(ctx context.Context, id string) (Version, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Version{}, nil
	}
	if err != nil {
		return Version{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	r, err := execution.Decode(e.Value())
	if err != nil {
		return Version{}, fmt.Errorf("read execution %s: decode: %w", id, err)
	}
	return Version{Rec: r, Rev: e.Revision()}, nil
}

// Put stores next with compare-and-set against cur (create when cur.Rev
// is 0) and returns the new revision. Like PutAsync, it marks next
// Tracked: its writer keeps a write mark (controller/writemark).
func (s Store) Put(ctx context.Context, cur Version, next *execution.Record) (uint64, error) {
	next.Tracked = true
	data, err := next.AppendJSON(make([]byte, 0, 1024)) // json.Marshal's bytes, by hand (execution.Record)
	if err != nil {
		return 0, fmt.Errorf("write execution %s: encode: %w", next.ExecID, err)
	}
	var rev uint64
	if cur.Rev == 0 {
		rev, err = s.kv.Create(ctx, next.ExecID, data)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, ErrCASConflict
		}
	} else {
		rev, err = s.kv.Update(ctx, next.ExecID, data, cur.Rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, ErrCASConflict
		}
	}
	if err != nil {
		return 0, fmt.Errorf("write execution %s: %w", next.ExecID, err)
	}
	return rev, nil
}

// Pending is a write of PutAsync in flight.
type Pending struct {
	id  string
	fut jetstream.PubAckFuture
	err error
}

// PutAsync publishes next to its key with compare-and-set on the revision
// cur was read at (0: the key must have no message), without waiting: the
// caller issues the writes of a batch, then waits for each (wait). A key
// whose last message is a delete or purge marker fails as a conflict here;
// put (a KV create) handles it.
func (s Store) PutAsync(cur Version, next *execution.Record) *Pending {
	p := &Pending{id: next.ExecID}
	next.Tracked = true
	data, err := next.AppendJSON(make([]byte, 0, 1024)) // json.Marshal's bytes, by hand (execution.Record)
	if err != nil {
		p.err = fmt.Errorf("write execution %s: encode: %w", next.ExecID, err)
		return p
	}
	m := &nats.Msg{Subject: streams.KVSubject(protocol.BucketExecs, next.ExecID), Data: data, Header: nats.Header{}}
	p.fut, p.err = s.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(cur.Rev), jetstream.WithStallWait(s.stallWait))
	if p.err != nil {
		p.err = fmt.Errorf("write execution %s: %w", next.ExecID, p.err)
	}
	return p
}

// Wait returns the revision the write was stored at, ErrCASConflict when
// the record changed since it was read, or why it failed.
func (p *Pending) Wait(ctx context.Context) (uint64, error) {
	if p.err != nil {
		return 0, p.err
	}
	select {
	case ack := <-p.fut.Ok():
		return ack.Sequence, nil
	case err := <-p.fut.Err():
		if streams.IsWrongLastSeq(err) {
			return 0, ErrCASConflict
		}
		return 0, fmt.Errorf("write execution %s: %w", p.id, err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Retire removes execution id from ax_execs (execution.Retire): a purge
// marker published with compare-and-set on rev (the record goes with it).
// With a marker TTL (WithMarkerTTL) the marker leaves by itself and none
// is returned; without, it is returned so that the sweeper purges the
// subject up to it on its next pass. A lost compare-and-set is
// ErrCASConflict.
func (s Store) Retire(ctx context.Context, id string, rev uint64) (*Marker, error) {
	seq, err := streams.PublishPurge(ctx, s.js, protocol.BucketExecs, id, rev, s.markerTTL)
	if streams.IsWrongLastSeq(err) {
		return nil, ErrCASConflict
	}
	if err != nil {
		return nil, fmt.Errorf("retire execution %s: %w", id, err)
	}
	if s.markerTTL > 0 {
		return nil, nil
	}
	return &Marker{Stream: streams.KVStream(protocol.BucketExecs), Subject: streams.KVSubject(protocol.BucketExecs, id), Seq: seq}, nil
}

// Marker is the purge marker a retirement left (a KV purge keeps one
// message): the sweeper purges its subject up to Seq on its next pass.
type Marker struct {
	Stream, Subject string
	Seq             uint64
}

// Stream is the stream behind ax_execs, and AllKeys the filter subject
// of every key in it: for readers of the stream itself (the last
// sequence a scan must reach), never for a write.
const (
	Stream  = "KV_" + protocol.BucketExecs
	AllKeys = "$KV." + protocol.BucketExecs + ".>"
)
