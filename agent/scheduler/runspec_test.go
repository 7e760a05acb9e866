package scheduler

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// fullRunSpec is how a worker read a stored spec before decodeRunSpec:
// a whole protocol.Job, then its three fields.
func fullRunSpec(raw []byte) runSpec {
	var j protocol.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return runSpec{}
	}
	return specOf(j)
}

// runSpecSeeds are stored specs as the agent writes them: with and
// without payload and timeout, with retry, a group target and a cron schedule.
func runSpecSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	a := protocoltest.NewJob("edge-s", "http", schedule.Spec{Every: "1s"}, map[string]any{"url": "http://127.0.0.1:9/x", "n": []int{1, 2}})
	a.Timeout = protocol.Duration(1500 * time.Millisecond)
	a.Retry = protocol.RetrySpec{MaxAttempts: 3}
	a.Target = protocol.Target{Group: "site=plant-3", Mode: protocol.ModeAll}
	b := protocoltest.NewJob("edge-s", "exec", schedule.Spec{Cron: "*/5 * * * *", Timezone: "Europe/Berlin"}, nil)
	var out [][]byte
	for _, j := range []protocol.Job{a, b} {
		raw, err := json.Marshal(j)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, raw)
	}
	return append(out, []byte(`{"handler":"noop","payload":null}`), []byte(`{"Handler":"noop","TIMEOUT":"2s","payload":[1, 2 ]}`),
		[]byte(`{"handler":7}`), []byte(`{"timeout":"soon","handler":"x"}`), []byte(`not json`), nil)
}

// TestDecodeRunSpec: the three fields a worker reads come out of a stored
// spec as a whole decode gives them, and a spec that does not decode gives
// the empty runSpec (the attempt fails for want of a handler).
func TestDecodeRunSpec(t *testing.T) {
	for _, raw := range runSpecSeeds(t) {
		got, want := decodeRunSpec(raw), fullRunSpec(raw)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", raw, got, want)
		}
	}
	if got := decodeRunSpec(runSpecSeeds(t)[0]); got.handler != "http" || got.timeout.D() != 1500*time.Millisecond || len(got.payload) == 0 {
		t.Fatalf("decoded %+v", got)
	}
}

// FuzzDecodeRunSpec: wherever a whole decode of a spec succeeds, the
// three-field decode gives the same runSpec.
func FuzzDecodeRunSpec(f *testing.F) {
	for _, raw := range runSpecSeeds(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var j protocol.Job
		if json.Unmarshal(raw, &j) != nil {
			return
		}
		if got, want := decodeRunSpec(raw), specOf(j); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %+v, want %+v", raw, got, want)
		}
	})
}

// BenchmarkDecodeRunSpec: the three-field decode against the whole
// protocol.Job it replaced, on a stored periodic http job.
func BenchmarkDecodeRunSpec(b *testing.B) {
	raw := runSpecSeeds(b)[0]
	for _, bc := range []struct {
		name string
		dec  func([]byte) runSpec
	}{{"fields", decodeRunSpec}, {"whole_job", fullRunSpec}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s := bc.dec(raw); s.handler == "" {
					b.Fatal("no handler")
				}
			}
		})
	}
}
