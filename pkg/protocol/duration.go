package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration string
// ("30s", "5m", "1h30m") in JSON and YAML. A bare JSON number is read as
// nanoseconds only when it is 0.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration string. encoding/json writes it as a
// JSON string; as a TextMarshaler rather than a json.Marshaler it costs
// no nested Marshal and no re-scan of the output (every record, command
// and event with a duration paid both).
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// UnmarshalJSON reads a duration string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" || string(b) == "null" {
		*d = 0
		return nil
	}
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && !bytes.ContainsAny(b[1:n-1], "\\\"") {
		s = string(b[1 : n-1]) // a plain string, as ax writes it: no decoder needed
	} else if err := json.Unmarshal(b, &s); err != nil {
		return durationTypeErr(truncate(string(b), 32))
	}
	if err := d.parse(s); err != nil {
		// An *UnmarshalTypeError gets the field path filled in by encoding/json.
		return durationTypeErr(fmt.Sprintf("%q", truncate(s, 32)))
	}
	return nil
}

func durationTypeErr(value string) error {
	return &json.UnmarshalTypeError{Value: value + " (want a duration such as \"30s\" or \"5m\")", Type: reflect.TypeFor[time.Duration]()}
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalText reads a duration string (used by YAML decoders and flags).
func (d *Duration) UnmarshalText(b []byte) error { return d.parse(string(b)) }

func (d *Duration) parse(s string) error {
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"30s\" or \"5m\"", truncate(s, 32))
	}
	*d = Duration(v)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
