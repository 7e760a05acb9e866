package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/pkg/apiv1"
)

// FuzzRequest sends arbitrary requests to the API over a real controller:
// no request makes it fail (5xx) or answer an error that is not an
// APIError JSON body.
func FuzzRequest(f *testing.F) {
	f.Add("POST", "/v1/jobs", "", `{"name":"a","handler":"exec","schedule":{"every":"1m"},"target":{"agent":"a1"}}`)
	f.Add("GET", "/v1/jobs", "limit=2&paused=true&group=site%3Da", "")
	f.Add("GET", "/v1/executions", "state=failed&job=ax-t1-20260101000000-aaaaaa", "")
	f.Add("POST", "/v1/jobs/ax-t1-20260101000000-aaaaaa:trigger", "", "")
	f.Add("PUT", "/v1/jobs/ax-t1-20260101000000-aaaaaa", "", `{"name":"a"}`)
	f.Add("POST", "/v1/executions/x-1:retry", "", "")
	f.Add("DELETE", "/v1/jobs/../agents", "", "")
	h, err := api.NewHandler(api.Options{Backend: startController(f), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") {
			return
		}
		req := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: path, RawQuery: rawQuery},
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(strings.NewReader(body)),
			Host:       "ax",
			RemoteAddr: "127.0.0.1:1",
		}
		req = req.WithContext(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s?%s: %d %s", method, path, rawQuery, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e apiv1.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("%s %s: %d is not an APIError: %s", method, path, rec.Code, rec.Body)
			}
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}
