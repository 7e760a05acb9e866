package retention

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// retireJob removes one-shot job id, every execution of which the index
// holds ended and gone from live state (Index.JobsDone: the caller asks),
// from the live job set; it records the job in history first
// (protocol.JobRetired on AX_EVT). It returns the
// purge markers it wrote, for the next pass to purge (or the delete
// marker of a deleted job, deletedJobMarker, read from jobs: ax_jobs'
// stream); safe to run for several jobs at once.
func (c *Retention) retireJob(ctx context.Context, jobs jetstream.Stream, id string, now time.Time) (bool, []execstore.Marker, error) {
	j, rev, err := c.host.ReadJob(ctx, id)
	if errors.Is(err, ErrJobNotFound) {
		ms, err := c.deletedJobMarker(ctx, jobs, id)
		return false, ms, err
	}
	if err != nil {
		return false, nil, err
	}
	if j.Periodic() || now.Sub(j.CreatedAt) < c.cfg.Grace {
		return false, nil, nil
	}
	data, err := protocol.Encode(protocol.JobRetired{V: protocol.Version, Job: j, At: now})
	if err != nil {
		return false, nil, fmt.Errorf("retire job %s: encode: %w", id, err)
	}
	msgID := "retired/" + id + "/" + strconv.FormatUint(j.Generation, 10)
	if _, err := c.js.Publish(ctx, protocol.JobRetiredSubject(id), data, jetstream.WithMsgID(msgID)); err != nil {
		return false, nil, fmt.Errorf("retire job %s: record in history: %w", id, err)
	}
	seq, err := c.purgeKey(ctx, protocol.BucketJobs, id, rev)
	if errors.Is(err, execstore.ErrCASConflict) {
		return false, nil, nil // updated meanwhile; its retirement in history is overwritten by the next one
	}
	if err != nil {
		return false, nil, fmt.Errorf("retire job %s: %w", id, err)
	}
	var ms []execstore.Marker
	if c.markerTTL() == 0 {
		ms = append(ms, execstore.Marker{Stream: streams.KVStream(protocol.BucketJobs), Subject: streams.KVSubject(protocol.BucketJobs, id), Seq: seq})
	}
	c.jobs.Remove(id, seq)
	if j.IdempotencyKey != "" {
		k := streams.IdemKey(j.IdempotencyKey)
		if e, err := c.idem.Get(ctx, k); err == nil && string(e.Value()) == id {
			if iseq, err := c.purgeKey(ctx, protocol.BucketIdem, k, e.Revision()); err == nil && c.markerTTL() == 0 {
				ms = append(ms, execstore.Marker{Stream: streams.KVStream(protocol.BucketIdem), Subject: streams.KVSubject(protocol.BucketIdem, k), Seq: iseq})
			}
		}
	}
	c.log.Debug("job retired", "job", id, "name", j.Name)
	return true, ms, nil
}

// purgeKey publishes a purge marker on key (the KV purge: the subject's
// earlier messages go) with compare-and-set on rev, and returns its
// sequence. The marker carries the markers' TTL when there is one
// (markerTTL) and then leaves by itself. A lost compare-and-set is
// execstore.ErrCASConflict. It is never used on ax_execs, whose one writer
// is the execution store.
func (c *Retention) purgeKey(ctx context.Context, bucket, key string, rev uint64) (uint64, error) {
	seq, err := streams.PublishPurge(ctx, c.js, bucket, key, rev, c.markerTTL())
	if streams.IsWrongLastSeq(err) {
		return 0, execstore.ErrCASConflict
	}
	if err != nil {
		return 0, fmt.Errorf("purge %s/%s: %w", bucket, key, err)
	}
	return seq, nil
}

// deletedJobMarker returns the delete marker an operator's delete of job
// id left in ax_jobs, for the next pass to purge, once every execution of
// the job ended and left live state (the caller asked the index:
// Index.JobsDone); none when the job was never made, or its marker is
// purged already. Until then the marker is what tells a reload
// that the job's PENDING executions belong to a deleted job (the
// controller's cancelDeletedJobRun and its orphan check read ax_jobs'
// history); afterwards nothing asks, and a marker left in the stream would
// stay for good, with its entry in the server's in-memory subject index,
// and be read at every start. A job that never had an execution keeps its
// marker.
func (c *Retention) deletedJobMarker(ctx context.Context, jobs jetstream.Stream, id string) ([]execstore.Marker, error) {
	name, subject := streams.KVStream(protocol.BucketJobs), streams.KVSubject(protocol.BucketJobs, id)
	m, err := jobs.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("deleted job %s: %w", id, err)
	}
	if op := m.Header.Get(kvOperation); op != kvOpDelete && op != kvOpPurge {
		return nil, nil // stored again meanwhile: not a deleted job
	}
	return []execstore.Marker{{Stream: name, Subject: subject, Seq: m.Sequence}}, nil
}

// The KV-Operation header of a KV delete and purge marker.
const (
	kvOperation = "KV-Operation"
	kvOpDelete  = "DEL"
	kvOpPurge   = "PURGE"
)

// ReleaseIdem removes idempotency key key (its KV key in ax_idem) with
// compare-and-set on rev, leaving nothing in the stream: a purge marker
// with the markers' TTL, or, without one, a purge marker and at once a
// purge of the key's subject up to it. Nothing watches ax_idem (a create
// reads a key, or claims it with KV Create), so the marker need not be
// seen first; a claim made between the two writes is newer than the
// marker and stays. A KV delete would leave its marker for good. A lost
// compare-and-set is execstore.ErrCASConflict.
func (c *Retention) ReleaseIdem(ctx context.Context, key string, rev uint64) error {
	seq, err := c.purgeKey(ctx, protocol.BucketIdem, key, rev)
	if err != nil || c.markerTTL() > 0 {
		return err
	}
	st, err := c.js.Stream(ctx, streams.KVStream(protocol.BucketIdem))
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(streams.KVSubject(protocol.BucketIdem, key)), jetstream.WithPurgeSequence(seq+1))
	}
	if err != nil {
		return fmt.Errorf("release idempotency key: purge its marker: %w", err)
	}
	return nil
}
