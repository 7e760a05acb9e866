package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"testing"
)

// bodyServer answers /empty with 204 and /big with 100 KiB ending in
// "THE END".
func bodyServer(t testing.TB) *httptest.Server {
	t.Helper()
	big := strings.Repeat("x", 100<<10) + "THE END"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(big))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPBodyTail: a response body longer than the tail is read to its
// end through the handler's small buffers and its last bytes are kept.
func TestHTTPBodyTail(t *testing.T) {
	srv := bodyServer(t)
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL + "/"}, Tail: 64})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(HTTPPayload{URL: srv.URL + "/big"})
	res := h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p})
	_, body, ok := strings.Cut(res.Message, "\nbody: ")
	if !ok || !strings.HasPrefix(body, "…") || !strings.HasSuffix(body, "THE END") || len(body) != len("…")+64 {
		t.Fatalf("message %q: want the body's last 64 bytes after …", res.Message)
	}
}

// TestHTTPBodyNoCopyBuffer: reading a response body makes no buffer of
// its own per attempt. io.Copy made a 32 KiB one, zeroed, for every
// attempt, even one answered 204 with no body; the handler now reads
// through its tails' pooled 4 KiB buffers. Counted: heap allocations of
// 30 KiB or more (nothing else in an attempt, client or test server, is
// that big).
func TestHTTPBodyNoCopyBuffer(t *testing.T) {
	if raceDetector {
		t.Skip("under -race sync.Pool drops buffers put back, and net/http makes its own pooled 32 KiB ones again")
	}
	srv := bodyServer(t)
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(HTTPPayload{URL: srv.URL + "/empty"})
	run := func() {
		if res := h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p}); res.Code != http.StatusNoContent {
			t.Fatalf("result %+v", res)
		}
	}
	const n = 200
	if got := bigAllocsOver(n, run); got >= n/2 {
		t.Fatalf("%d allocations of 30 KiB or more in %d attempts, want almost none (no copy buffer per attempt)", got, n)
	}
}

// TestExecOutputNoCopyBuffer: an exec attempt reads its command's
// stdout and stderr without a buffer of its own: os/exec's io.Copy made
// a 32 KiB one for each. The output's tails are still kept.
func TestExecOutputNoCopyBuffer(t *testing.T) {
	if raceDetector {
		t.Skip("under -race sync.Pool drops buffers put back")
	}
	e, err := NewExec(ExecConfig{Allow: []string{"/bin/sh"}, Tail: 8})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(ExecPayload{Command: "/bin/sh", Args: []string{"-c", "echo out-0123456789; echo err-0123456789 >&2"}})
	run := func() {
		res := e.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p})
		if want := "exit status 0\nstdout: …3456789\n\nstderr: …3456789\n"; res.Code != 0 || res.Message != want {
			t.Fatalf("result %+v: want message %q (both streams' last 8 bytes)", res, want)
		}
	}
	const n = 20
	if got := bigAllocsOver(n, run); got >= n {
		t.Fatalf("%d allocations of 30 KiB or more in %d attempts, want almost none (no copy buffer per stream)", got, n)
	}
}

// bigAllocsOver runs run once (the connection, the pool's first buffer),
// then n times, and returns how many heap allocations of 30 KiB or more
// the n runs made.
func bigAllocsOver(n int, run func()) uint64 {
	run()
	before := bigAllocs(30 << 10)
	for range n {
		run()
	}
	return bigAllocs(30<<10) - before
}

// bigAllocs is how many heap allocations of at least size bytes this
// process made so far (runtime/metrics, by size class).
func bigAllocs(size float64) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	var n uint64
	for i, c := range h.Counts {
		if h.Buckets[i] >= size {
			n += c
		}
	}
	return n
}

// BenchmarkHTTPRun: one attempt of the http handler against a local
// server answering 204, with its allocations.
func BenchmarkHTTPRun(b *testing.B) {
	srv := bodyServer(b)
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL + "/"}})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := json.Marshal(HTTPPayload{URL: srv.URL + "/empty"})
	b.ReportAllocs()
	for b.Loop() {
		h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p})
	}
}
