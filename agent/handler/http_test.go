package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/axsched/ax/pkg/retry"
)

func TestHTTPHandler(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Path {
		case "/api/ok":
			_, _ = w.Write([]byte("fine"))
		case "/api/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/api/bad":
			w.WriteHeader(http.StatusBadRequest)
		case "/api/redirect":
			http.Redirect(w, r, "/admin", http.StatusFound)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	h, err := NewHTTP(HTTPConfig{Allow: []string{srv.URL + "/api/"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		url           string
		wantCode      int
		wantRetryable bool
		wantCall      bool
	}{
		{"2xx success", srv.URL + "/api/ok", 200, false, true},
		{"503 retryable", srv.URL + "/api/busy", 503, true, true},
		{"400 permanent", srv.URL + "/api/bad", 400, false, true},
		{"outside allowlist never called", srv.URL + "/admin", -1, false, false},
		{"dot segments cannot escape", srv.URL + "/api/../admin", -1, false, false},
		{"redirect out of allowlist refused for good", srv.URL + "/api/redirect", 302, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			p, _ := json.Marshal(HTTPPayload{URL: tc.url})
			res := h.Run(context.Background(), Task{ExecID: "e", Attempt: 1, Payload: p})
			if res.Code != tc.wantCode || res.Retryable != tc.wantRetryable {
				t.Fatalf("result %+v, want code %d retryable %v", res, tc.wantCode, tc.wantRetryable)
			}
			if want := tc.wantCode == 200; (res.Outcome == retry.OutcomeSuccess) != want {
				t.Fatalf("outcome %s, want success %v", res.Outcome, want)
			}
			if called := calls.Load() > before; called != tc.wantCall {
				t.Fatalf("server called = %v, want %v", called, tc.wantCall)
			}
		})
	}
}

func TestExecPayloadDecode(t *testing.T) {
	bad := []string{`{}`, `{"command":"/bin/true","bogus":1}`, `{"command":"/bin/true","env":{"AX_JOB_ID":"x"}}`, `nope`}
	for _, b := range bad {
		if _, err := DecodeExecPayload([]byte(b)); err == nil {
			t.Errorf("%s: accepted", b)
		}
	}
	e, err := NewExec(ExecConfig{Allow: []string{"/opt/ax/*"}})
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]bool{"/opt/ax/run": true, "/opt/ax/../../bin/sh": false, "/opt/ax/sub/x": false, "run": false} {
		if got := e.Allowed(cmd); got != want {
			t.Errorf("Allowed(%q) = %v", cmd, got)
		}
	}
	if _, err := NewExec(ExecConfig{Allow: []string{"relative"}}); err == nil || !strings.Contains(err.Error(), "exec.allow[0]") {
		t.Errorf("relative allow entry: %v", err)
	}
}
