package storedjson_test

import (
	stdjson "encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// samples are a job spec and an execution record with every kind of field
// ax stores: strings, numbers, durations, times, raw payloads, maps,
// slices and nested structs.
func samples(t testing.TB) []any {
	now := time.Date(2026, 12, 2, 1, 31, 21, 393992084, time.UTC)
	j := protocol.Job{ID: "ax-bench-20261202013121-4au8ws", Name: "close-order-12345", Handler: "exec",
		Payload:  stdjson.RawMessage(`{"cmd":["/bin/true"],"env":{"A":"x"}}`),
		Schedule: schedule.Spec{Delay: "30m"}, Target: protocol.Target{Group: "site=plant-3,k=v", Mode: protocol.ModeAll},
		Timeout: protocol.Duration(90 * time.Second), Retry: protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(time.Second)},
		IdempotencyKey: "order-12345", Paused: true, Generation: 7, CreatedAt: now}
	rec := execution.Record{Execution: protocol.Execution{ExecID: protocol.ExecID(j.ID, now), JobID: j.ID, Attempt: 3,
		State: protocol.StateRetryWaiting, Agent: "edge-1", ScheduledAt: now, CreatedAt: now, UpdatedAt: now.Add(time.Second),
		NextAttemptAt: now.Add(time.Minute), Outcome: retry.OutcomeFailure, Result: &retry.Result{Code: 2, Retryable: true},
		Reason: "exit 2", Epoch: 9, Lag: protocol.Duration(3 * time.Millisecond), Duration: protocol.Duration(time.Second)},
		Applied: []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished},
		Path:    []protocol.State{protocol.StateTriggered, protocol.StateRunning, protocol.StateRetryWaiting}, Sent: 3}
	// A payload with escapes and non-ASCII text takes the decoder's slow
	// path (about encoding/json's speed); it must decode the same.
	odd := j
	odd.Payload = stdjson.RawMessage(`{"cmd":["/bin/echo","é\u2028\"q\""],"n":1e3}`)
	return []any{&j, &rec, &odd}
}

// TestUnmarshalAsStandardLibrary: every sample, written by encoding/json,
// decodes to the same value through Unmarshal as through encoding/json.
func TestUnmarshalAsStandardLibrary(t *testing.T) {
	for _, s := range samples(t) {
		b, err := stdjson.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want := reflect.New(reflect.TypeOf(s).Elem()).Interface()
		got := reflect.New(reflect.TypeOf(s).Elem()).Interface()
		if err := stdjson.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		if err := storedjson.Unmarshal(b, got); err != nil {
			t.Fatalf("Unmarshal %s: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T decoded differently:\n got %+v\nwant %+v", s, got, want)
		}
	}
}

// TestUnmarshalRefusesBadJSON: a truncated record is an error, as with
// encoding/json.
func TestUnmarshalRefusesBadJSON(t *testing.T) {
	var j protocol.Job
	if err := storedjson.Unmarshal([]byte(`{"id":"x","name":`), &j); err == nil {
		t.Fatal("truncated JSON decoded without an error")
	}
}

// BenchmarkUnmarshal compares Unmarshal with encoding/json's on a job
// spec and an execution record.
func BenchmarkUnmarshal(b *testing.B) {
	for _, s := range samples(b)[:2] {
		data, err := stdjson.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		typ := reflect.TypeOf(s).Elem()
		for _, d := range []struct {
			name string
			f    func([]byte, any) error
		}{{"encoding-json", stdjson.Unmarshal}, {"storedjson", storedjson.Unmarshal}} {
			b.Run(typ.Name()+"/"+d.name, func(b *testing.B) {
				for b.Loop() {
					if err := d.f(data, reflect.New(typ).Interface()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
