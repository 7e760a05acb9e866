package storedjson

import "github.com/segmentio/encoding/json"

// Unmarshal decodes data, a record ax stored itself, into v, with the
// rules of encoding/json's Unmarshal (unknown fields ignored, the types'
// own UnmarshalJSON methods called).
func Unmarshal(data []byte, v any) error {
	return json.Unmarshal(data, v)
}
