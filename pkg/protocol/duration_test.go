package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// TestDurationJSONBytes: a Duration is written as the JSON string of its Go
// duration string, byte for byte what json.Marshal of that string gives
// (stored records and wire messages keep their bytes), omitted by
// omitempty when zero, and read back to the same value.
func TestDurationJSONBytes(t *testing.T) {
	type holder struct {
		D Duration `json:"d"`
		O Duration `json:"o,omitempty"`
	}
	for _, d := range []time.Duration{0, time.Nanosecond, 1500 * time.Microsecond, 1500 * time.Millisecond,
		90 * time.Minute, -2 * time.Second, 26*time.Hour + 3*time.Second, time.Duration(1<<63 - 1)} {
		got, err := json.Marshal(holder{D: Duration(d), O: Duration(d)})
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		str, _ := json.Marshal(d.String())
		want := `{"d":` + string(str) + `,"o":` + string(str) + `}`
		if d == 0 {
			want = `{"d":` + string(str) + `}`
		}
		if string(got) != want {
			t.Errorf("%v: got %s, want %s", d, got, want)
		}
		var back holder
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%v: read back: %v", d, err)
		}
		if back.D.D() != d || back.O.D() != d {
			t.Errorf("%v: read back %v / %v", d, back.D, back.O)
		}
	}
}
