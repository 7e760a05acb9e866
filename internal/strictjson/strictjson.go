package strictjson

import (
	"fmt"
	"reflect"
	"time"

	"github.com/segmentio/encoding/iso8601"
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
	if err := sameTimes(data); err != nil {
		return err
	}
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

// sameTimes returns ErrTime when a string of data is one the decoder
// would read as a time.Time otherwise than encoding/json does. The decoder
// reads a time.Time with its own ISO 8601 parser (iso8601.Parse), not
// with time.Time's UnmarshalJSON: it takes, for one, "00:00;00" for
// "00:00:00". Every string without escapes that iso8601.Parse takes must
// therefore be one UnmarshalJSON takes, to the same value; a string that
// is no time at all costs only the check. Strings with escapes are left
// to the decoder, whose time parser refuses them.
func sameTimes(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		j, escaped := i+1, false
		for ; j < len(data) && data[j] != '"'; j++ {
			if data[j] == '\\' {
				escaped = true
				j++
			}
		}
		if j >= len(data) {
			return nil // an unterminated string: the decoder refuses data
		}
		// A time is at least 20 bytes ("2006-01-02T15:04:05Z") and starts
		// with a digit of its year, for both parsers.
		if s := data[i+1 : j]; !escaped && len(s) >= 20 && s[0] >= '0' && s[0] <= '9' {
			if t1, err := iso8601.Parse(string(s)); err == nil {
				var t2 time.Time
				if err := t2.UnmarshalJSON(data[i : j+1]); err != nil || t1 != t2 && !reflect.DeepEqual(t1, t2) {
					return ErrTime
				}
			}
		}
		i = j
	}
	return nil
}
