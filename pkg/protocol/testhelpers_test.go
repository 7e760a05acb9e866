package protocol

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

var (
	t0    = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	jobID = NewJobID("ctl1", t0, 12345)
)

func validJob() Job {
	return Job{
		ID:       jobID,
		Name:     "valve sweep",
		Handler:  "exec",
		Payload:  json.RawMessage(`{"command":"/usr/bin/valvectl","args":["sweep"]}`),
		Schedule: scheduleEvery("1m"),
		Target:   Target{Agent: "edge-7"},
		Priority: 5,
		Timeout:  Duration(30 * time.Second),
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantField asserts err is a *FieldError on field wrapping sentinel.
func wantField(t *testing.T, err error, sentinel error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error on %q, got nil", field)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %q is not a *FieldError", err)
	}
	if fe.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, fe.Field, field)
	}
}
