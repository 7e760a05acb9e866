package streams

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// KVStream is the name of the stream behind KV bucket bucket.
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubject is the subject of key in KV bucket bucket (">" for all keys).
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

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
