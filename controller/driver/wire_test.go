package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/axsched/ax/controller/driver"
)

// sampleChanges are a create, an update and a delete of one job.
func sampleChanges() []driver.Change {
	return []driver.Change{
		{Next: job(jobID, 1, false), Rev: 7},
		{Old: job(jobID, 1, false), Next: job(jobID, 2, true), Rev: 9},
		{Old: job(jobID, 3, false), Rev: 12},
	}
}

// TestDecodeRequest: a request round-trips; each way a request can be
// wrong is refused with ErrBadRequest and an error naming the field.
func TestDecodeRequest(t *testing.T) {
	for _, ch := range sampleChanges() {
		data, err := driver.EncodeRequest(ch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := driver.DecodeRequest(data)
		if err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if got.JobID() != jobID || got.Rev != ch.Rev || (got.Old == nil) != (ch.Old == nil) || (got.Next == nil) != (ch.Next == nil) {
			t.Fatalf("round trip of %s = %+v", data, got)
		}
		if got.Next != nil && (got.Next.Generation != ch.Next.Generation || got.Next.Paused != ch.Next.Paused || got.Next.Schedule.Every != "1m") {
			t.Fatalf("round trip of next: %+v", got.Next)
		}
	}

	const other = "ax-ctl-20261204090000-zzzzzz"
	for _, tc := range []struct {
		name, data, field string
	}{
		{"not json", `{"v":1`, ""},
		{"unknown field", `{"v":1,"job":"` + jobID + `","rev":3,"next":{"id":"` + jobID + `","generation":1},"extra":1}`, "extra"},
		{"other version", `{"v":2,"job":"` + jobID + `","next":{"id":"` + jobID + `","generation":1}}`, "v:"},
		{"bad job id", `{"v":1,"job":"../x","next":{"id":"../x","generation":1}}`, "job"},
		{"no side", `{"v":1,"job":"` + jobID + `","rev":3}`, "old, next"},
		{"no rev", `{"v":1,"job":"` + jobID + `","next":{"id":"` + jobID + `","generation":1}}`, "rev"},
		{"ids differ", `{"v":1,"job":"` + jobID + `","rev":3,"old":{"id":"` + jobID + `","generation":1},"next":{"id":"` + other + `","generation":2}}`, "next.id"},
		{"generation back", `{"v":1,"job":"` + jobID + `","rev":3,"old":{"id":"` + jobID + `","generation":2},"next":{"id":"` + jobID + `","generation":2}}`, "next.generation"},
		{"job is another", `{"v":1,"job":"` + other + `","rev":3,"next":{"id":"` + jobID + `","generation":1}}`, "job:"},
		{"trailing data", `{"v":1,"job":"` + jobID + `","rev":3,"next":{"id":"` + jobID + `","generation":1}}{}`, "after"},
		{"too large", `{"v":1,"job":"` + strings.Repeat("x", driver.MaxRequestSize) + `"}`, "bytes"},
	} {
		_, err := driver.DecodeRequest([]byte(tc.data))
		if !errors.Is(err, driver.ErrBadRequest) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v; want ErrBadRequest naming %q", tc.name, err, tc.field)
		}
	}
}

// TestDecodeReply: a reply is done or refused, never both nor neither.
func TestDecodeReply(t *testing.T) {
	for _, r := range []driver.Reply{{Done: true}, {Refused: driver.ReasonNotOwner}} {
		got, err := driver.DecodeReply(driver.EncodeReply(r))
		if err != nil || got.Done != r.Done || got.Refused != r.Refused || got.V != driver.Version {
			t.Fatalf("round trip of %+v = %+v, %v", r, got, err)
		}
	}
	for _, bad := range []string{`{"v":1}`, `{"v":1,"done":true,"refused":"busy"}`, `{"v":0,"done":true}`, `{"v":1,"done":true,"x":1}`, `[`} {
		if _, err := driver.DecodeReply([]byte(bad)); !errors.Is(err, driver.ErrBadRequest) {
			t.Errorf("DecodeReply(%s) = %v; want ErrBadRequest", bad, err)
		}
	}
}

// FuzzDecodeRequest: no input panics; what decodes holds together and
// encodes again to a request that decodes to the same change.
func FuzzDecodeRequest(f *testing.F) {
	for _, ch := range sampleChanges() {
		data, err := driver.EncodeRequest(ch)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ch, err := driver.DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, driver.ErrBadRequest) {
				t.Fatalf("error %v does not match ErrBadRequest", err)
			}
			return
		}
		if ch.Old == nil && ch.Next == nil {
			t.Fatal("decoded a change with neither side")
		}
		again, err := driver.EncodeRequest(ch)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := driver.DecodeRequest(again)
		if err != nil || back.JobID() != ch.JobID() {
			t.Fatalf("re-decode: %+v, %v", back, err)
		}
	})
}

// FuzzDecodeReply: no input panics; what decodes is done or refused.
func FuzzDecodeReply(f *testing.F) {
	f.Add(driver.EncodeReply(driver.Reply{Done: true}))
	f.Add(driver.EncodeReply(driver.Reply{Refused: driver.ReasonBusy}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := driver.DecodeReply(data)
		if err == nil && r.Done == (r.Refused != "") {
			t.Fatalf("decoded %+v", r)
		}
	})
}
