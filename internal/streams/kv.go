package streams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KVStream is the name of the stream behind KV bucket bucket.
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubject is the subject of key in KV bucket bucket (">" for all keys).
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// IdemKey is the key of idempotency key k in ax_idem: the hex SHA-256 of
// k.
func IdemKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// IsWrongLastSeq reports a lost compare-and-set of a KV write (the key's
// last revision is not the one expected).
func IsWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// PublishPurge removes key from KV bucket bucket: a purge marker
// (KV-Operation PURGE, a rollup of the key's subject, so its earlier
// messages go) published with compare-and-set on rev, carrying per-message
// TTL ttl when ttl > 0 (the bucket must take TTLs: Buckets.MsgTTL; the
// marker then leaves by itself). It returns the marker's sequence; a lost
// compare-and-set matches IsWrongLastSeq.
func PublishPurge(ctx context.Context, js jetstream.JetStream, bucket, key string, rev uint64, ttl time.Duration) (uint64, error) {
	m := nats.NewMsg(KVSubject(bucket, key))
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	ack, err := js.PublishMsg(ctx, m, opts...)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
