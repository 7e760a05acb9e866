package strictjson

import (
	"errors"
	"testing"
	"time"
)

type msg struct {
	A  string    `json:"a"`
	N  int       `json:"n,omitempty"`
	At time.Time `json:"at"`
}

// TestUnmarshal: one value decodes, white space after it is allowed;
// unknown fields, a second value or other data after it, and a wrong type
// are refused.
func TestUnmarshal(t *testing.T) {
	var m msg
	if err := Unmarshal([]byte(" {\"a\":\"x\",\"n\":3,\"at\":\"2026-12-05T01:02:03Z\"} \n\t"), &m); err != nil {
		t.Fatal(err)
	}
	if m.A != "x" || m.N != 3 || !m.At.Equal(time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)) {
		t.Fatalf("decoded %+v", m)
	}
	for _, tc := range []struct {
		in   string
		want error // nil: any error
	}{
		{`{"a":"x","zz":1}`, nil},
		{`{"a":"x"}{"a":"y"}`, ErrTrailing},
		{`{"a":"x"} x`, ErrTrailing},
		{`{"a":1}`, nil},
		{`{"a":"x"`, nil},
		{`{"at":"yesterday"}`, nil},
	} {
		var m msg
		err := Unmarshal([]byte(tc.in), &m)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err %v, want %v", tc.in, err, tc.want)
		}
	}
}

// TestUnmarshalPanic: a panic under the decoder (here: of a type's own
// UnmarshalJSON) is returned as ErrPanic.
func TestUnmarshalPanic(t *testing.T) {
	var p struct {
		P panicky `json:"p"`
	}
	if err := Unmarshal([]byte(`{"p":1}`), &p); !errors.Is(err, ErrPanic) {
		t.Fatalf("err %v, want ErrPanic", err)
	}
}

type panicky struct{}

func (*panicky) UnmarshalJSON([]byte) error { panic("boom") }

// TestUnmarshalTimes: a time the decoder's own parser reads otherwise
// than encoding/json (here one it takes and encoding/json refuses) is
// refused with ErrTime, so that encoding/json decodes the message; times
// both read alike decode.
func TestUnmarshalTimes(t *testing.T) {
	var m msg
	for _, in := range []string{`{"at":"0000-01-10T00:00;00Z"}`, `{"a":"2026-12-05T01:02;03Z"}`} {
		if err := Unmarshal([]byte(in), &m); !errors.Is(err, ErrTime) {
			t.Errorf("%s: err %v, want ErrTime", in, err)
		}
	}
	for _, in := range []string{`{"at":"2026-12-05T01:02:03.123456789Z"}`, `{"at":"2026-12-05T01:02:03+02:00"}`, `{"a":"not a time at all, long enough"}`} {
		if err := Unmarshal([]byte(in), &m); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}
