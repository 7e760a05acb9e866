package strictjson

import (
	"fmt"

	"github.com/segmentio/encoding/json"
)

// Unmarshal decodes data, one JSON value with nothing but white space
// after it, into v (a pointer), refusing fields v's type does not have.
// The types' own UnmarshalJSON methods are called. It has the signature
// of protocol.Unmarshal.
func Unmarshal(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	rest, err := json.Parse(data, v, json.DisallowUnknownFields)
	if err != nil {
		return err
	}
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return ErrTrailing
		}
	}
	return nil
}
