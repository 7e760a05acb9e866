package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name, value, date string
		want              time.Duration
	}{
		{"absent", "", "", 0},
		{"seconds", "7", "", 7 * time.Second},
		{"zero", "0", "", 0},
		{"spaces", " 3 ", "", 3 * time.Second},
		{"negative", "-1", "", 0},
		{"fraction", "1.5", "", 0},
		{"garbage", "soon", "", 0},
		{"huge", "99999999999999999999999", "", retry.MaxDelayLimit},
		{"over the limit", "864000000", "", retry.MaxDelayLimit},
		{"date against now", date(now.Add(30 * time.Second)), "", 30 * time.Second},
		{"date against the server's Date", date(now.Add(time.Hour + 30*time.Second)), date(now.Add(time.Hour)), 30 * time.Second},
		{"date in the past", date(now.Add(-time.Minute)), "", 0},
		{"bad Date header: now", date(now.Add(10 * time.Second)), "yesterday", 10 * time.Second},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		if tc.date != "" {
			h.Set("Date", tc.date)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("%s: retryAfter(%q, Date %q) = %s, want %s", tc.name, tc.value, tc.date, got, tc.want)
		}
	}
}

// TestHTTPResultOutcome: the result says the outcome; Retry-After is kept
// for a retryable status only.
func TestHTTPResultOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		switch r.URL.Path {
		case "/ok":
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/throttled":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		}
	}))
	defer srv.Close()
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path       string
		outcome    retry.Outcome
		code       int
		retryable  bool
		retryAfter time.Duration
	}{
		{"/ok", retry.OutcomeSuccess, 200, false, 0},
		{"/busy", retry.OutcomeFailure, 503, true, 7 * time.Second},
		{"/throttled", retry.OutcomeFailure, 429, true, 7 * time.Second},
		{"/gone", retry.OutcomeFailure, 410, false, 0},
	} {
		p, _ := json.Marshal(HTTPPayload{URL: srv.URL + tc.path})
		res := h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p})
		if res.Outcome != tc.outcome || res.Code != tc.code || res.Retryable != tc.retryable || res.RetryAfter != tc.retryAfter {
			t.Errorf("%s: %+v, want outcome %s code %d retryable %v retry after %s", tc.path, res, tc.outcome, tc.code, tc.retryable, tc.retryAfter)
		}
	}
}

// TestHTTPPayloadHeaders: header names must be tokens and values free of
// control characters; refused before any call, for good.
func TestHTTPPayloadHeaders(t *testing.T) {
	for _, hdr := range []map[string]string{
		{"Bad Name": "x"}, {"": "x"}, {"X:Y": "x"}, {"X-Ä": "x"},
		{"X-A": "a\r\nX-Injected: 1"}, {"X-A": "a\nb"}, {"X-A": "a\x00b"}, {"X-A": "a\x7fb"},
	} {
		b, _ := json.Marshal(HTTPPayload{URL: "https://a.example/", Headers: hdr})
		if _, err := DecodeHTTPPayload(b); err == nil || !strings.HasPrefix(err.Error(), "payload.headers") {
			t.Errorf("headers %q: error %v, want payload.headers...", hdr, err)
		}
	}
	b, _ := json.Marshal(HTTPPayload{URL: "https://a.example/", Headers: map[string]string{"X-Token_1.v": "a\tb é", "Content-Type": "application/json"}})
	if _, err := DecodeHTTPPayload(b); err != nil {
		t.Errorf("valid headers: %v", err)
	}
}
