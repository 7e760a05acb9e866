package e2e

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// hitLog records when each path of the test server was called.
type hitLog struct {
	mu   sync.Mutex
	hits map[string][]time.Time
}

// hit records a call of path and returns how many calls it had before.
func (h *hitLog) hit(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.hits[path])
	h.hits[path] = append(h.hits[path], time.Now())
	return n
}

func (h *hitLog) of(path string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.hits[path]...)
}

// httpTestServer is a real HTTP server on loopback:
//
//	/api/ok, /api/ok-*      200
//	/api/moved              302 to /admin/moved (outside http.allow)
//	/api/missing            404
//	/api/throttled          429 Retry-After: 1 on the first call, then 200
//	/api/busy               503 Retry-After: 1 on the first call, then 200
//	/api/slow               waits until the client gives up
//	/api/slow-once          waits until the client gives up on the first call, then 200
//	/admin/*, /apiadmin     200 (must never be called)
func httpTestServer(t *testing.T) (*httptest.Server, *hitLog) {
	t.Helper()
	log := &hitLog{hits: map[string][]time.Time{}}
	stop := make(chan struct{})
	wait := func(r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := log.hit(r.URL.Path)
		switch p := r.URL.Path; {
		case p == "/api/ok" || strings.HasPrefix(p, "/api/ok-") || strings.HasPrefix(p, "/admin") || p == "/apiadmin":
			_, _ = w.Write([]byte("fine"))
		case p == "/api/moved":
			http.Redirect(w, r, "/admin/moved", http.StatusFound)
		case p == "/api/missing":
			http.NotFound(w, r)
		case (p == "/api/throttled" || p == "/api/busy") && n == 0:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(map[string]int{"/api/throttled": http.StatusTooManyRequests, "/api/busy": http.StatusServiceUnavailable}[p])
		case p == "/api/throttled" || p == "/api/busy":
			_, _ = w.Write([]byte("fine now"))
		case p == "/api/slow" || (p == "/api/slow-once" && n == 0):
			wait(r)
		case p == "/api/slow-once":
			_, _ = w.Write([]byte("quick now"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: releases waiting handlers
	return srv, log
}

// TestHTTPJobs runs http jobs through a real controller and agent against
// a real HTTP server on loopback: 2xx succeeds; a redirect outside
// http.allow, a 4xx and a URL outside http.allow fail for good (no retry,
// and the last never reaches the server); 429 and 503 are retried no
// sooner than their Retry-After; a timeout is recorded as a timeout and
// retried only with retry.on_timeout. An invalid header name or value is
// refused at the create, naming its field, and makes no execution (the
// agent refuses one too, if a job carries it: agent/handler's
// TestHTTPPayloadHeaders).
func TestHTTPJobs(t *testing.T) {
	srv, hits := httpTestServer(t)
	c := startCtl(t, ctlConfig(t.TempDir(), -1))
	cfg := agentConfig("edge-h", c.NATSURL(), t.TempDir(), nil)
	// http://127.0.0.1 is port 80 only: it must not admit the test
	// server's port, as a string prefix did.
	cfg.HTTP.Allow = []string{srv.URL + "/api", "http://127.0.0.1"}
	cfg.Workers = 8
	startAgent(t, cfg)
	waitAgentOnline(t, c, "edge-h")

	const base = 50 * time.Millisecond
	retries := protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(base), Max: protocol.Duration(5 * time.Second)}
	onTimeout := retries
	onTimeout.OnTimeout = true
	tests := []struct {
		name     string
		url      string
		headers  map[string]string
		timeout  time.Duration
		retry    protocol.RetrySpec
		state    protocol.State
		attempts int
		outcome  retry.Outcome
		reason   string
		code     int
		hits     map[string]int
		// gap is the least time between the first two calls.
		gap time.Duration
	}{
		{name: "2xx", url: srv.URL + "/api/ok", retry: retries,
			state: protocol.StateSuccess, attempts: 1, outcome: retry.OutcomeSuccess, reason: retry.ReasonSucceeded, code: 200,
			hits: map[string]int{"/api/ok": 1}},
		{name: "redirect-outside-allow", url: srv.URL + "/api/moved", retry: retries,
			state: protocol.StateFailed, attempts: 1, outcome: retry.OutcomeFailure, reason: retry.ReasonNotRetryable, code: 302,
			hits: map[string]int{"/api/moved": 1, "/admin/moved": 0}},
		{name: "4xx", url: srv.URL + "/api/missing", retry: retries,
			state: protocol.StateFailed, attempts: 1, outcome: retry.OutcomeFailure, reason: retry.ReasonNotRetryable, code: 404,
			hits: map[string]int{"/api/missing": 1}},
		{name: "429-retry-after", url: srv.URL + "/api/throttled", retry: retries,
			state: protocol.StateSuccess, attempts: 2, outcome: retry.OutcomeSuccess, reason: retry.ReasonSucceeded, code: 200,
			hits: map[string]int{"/api/throttled": 2}, gap: time.Second},
		{name: "503-retry-after", url: srv.URL + "/api/busy", retry: retries,
			state: protocol.StateSuccess, attempts: 2, outcome: retry.OutcomeSuccess, reason: retry.ReasonSucceeded, code: 200,
			hits: map[string]int{"/api/busy": 2}, gap: time.Second},
		{name: "timeout", url: srv.URL + "/api/slow", timeout: 300 * time.Millisecond, retry: retries,
			state: protocol.StateFailed, attempts: 1, outcome: retry.OutcomeTimeout, reason: retry.ReasonTimeoutSuspect, code: -1,
			hits: map[string]int{"/api/slow": 1}},
		{name: "timeout-on-timeout", url: srv.URL + "/api/slow-once", timeout: 300 * time.Millisecond, retry: onTimeout,
			state: protocol.StateSuccess, attempts: 2, outcome: retry.OutcomeSuccess, reason: retry.ReasonSucceeded, code: 200,
			hits: map[string]int{"/api/slow-once": 2}},
		{name: "other-port", url: "http://127.0.0.1:" + srv.URL[strings.LastIndexByte(srv.URL, ':')+1:] + "/admin", retry: retries,
			state: protocol.StateFailed, attempts: 1, outcome: retry.OutcomeFailure, reason: retry.ReasonNotRetryable, code: -1,
			hits: map[string]int{"/admin": 0}},
		{name: "partial-path-segment", url: srv.URL + "/apiadmin", retry: retries,
			state: protocol.StateFailed, attempts: 1, outcome: retry.OutcomeFailure, reason: retry.ReasonNotRetryable, code: -1,
			hits: map[string]int{"/apiadmin": 0}},
	}
	for _, hdr := range []struct {
		headers map[string]string
		field   string
	}{
		{map[string]string{"Bad Name": "x"}, "payload.headers"},
		{map[string]string{"X-A": "a\r\nX-Injected: 1"}, "payload.headers[X-A]"},
	} {
		_, err := c.CreateJob(testutil.Context(t, 10*time.Second), protocol.Job{Name: "bad-header", Handler: "http",
			Payload:  mustJSON(t, map[string]any{"url": srv.URL + "/api/ok-name", "headers": hdr.headers}),
			Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-h"}})
		var fe *protocol.FieldError
		if !errors.As(err, &fe) || fe.Field != hdr.field {
			t.Fatalf("create with headers %q: %v, want a field error on %s", hdr.headers, err, hdr.field)
		}
	}
	t.Run("group", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				j := createJob(t, c, protocol.Job{Name: tc.name, Handler: "http",
					Payload:  mustJSON(t, map[string]any{"url": tc.url, "headers": tc.headers}),
					Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-h"},
					Timeout: protocol.Duration(tc.timeout), Retry: tc.retry})
				e := waitExecs(t, c, j.ID, 1, "terminal", func(e protocol.Execution) bool { return e.State.Terminal() })[0]
				code := 0
				if e.Result != nil {
					code = e.Result.Code
				}
				if e.State != tc.state || e.Attempt != tc.attempts || e.Outcome != tc.outcome || e.Reason != tc.reason || code != tc.code {
					t.Errorf("execution: %s attempt %d outcome %q reason %q code %d, want %s %d %q %q %d (result %+v)",
						e.State, e.Attempt, e.Outcome, e.Reason, code, tc.state, tc.attempts, tc.outcome, tc.reason, tc.code, e.Result)
				}
				for path, n := range tc.hits {
					if got := len(hits.of(path)); got != n {
						t.Errorf("%s called %d times, want %d", path, got, n)
					}
				}
				if tc.gap > 0 {
					for path := range tc.hits {
						h := hits.of(path)
						if len(h) < 2 {
							continue
						}
						if got := h[1].Sub(h[0]); got < tc.gap {
							t.Errorf("%s: retry %s after the first call, want ≥ %s (Retry-After)", path, got, tc.gap)
						} else {
							t.Logf("%s: retry %s after the first call (Retry-After %s, backoff %s)", path, got, tc.gap, base)
						}
					}
				}
			})
		}
	})
}
