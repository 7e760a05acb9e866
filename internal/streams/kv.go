package streams

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

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
