package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/apiv1"
)

// startController runs a real controller with an embedded NATS server on a
// random port and a temp store.
func startController(t testing.TB) *controller.Controller {
	t.Helper()
	return apitest.Start(t, apitest.Config(t))
}

// logBuf is a concurrency-safe log sink.
type logBuf = testutil.Buffer

// env is an API served by httptest over a backend.
type env struct {
	t    *testing.T
	srv  *httptest.Server
	ctrl *controller.Controller
	logs *logBuf
	tok  string
}

func newEnv(t *testing.T, tokens ...api.Token) *env {
	t.Helper()
	ctrl := startController(t)
	e := newEnvBackend(t, ctrl, tokens...)
	e.ctrl = ctrl
	return e
}

func newEnvBackend(t *testing.T, b api.Backend, tokens ...api.Token) *env {
	t.Helper()
	logs := &logBuf{}
	opts := api.Options{Backend: b, Tokens: tokens, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if c, ok := b.(*controller.Controller); ok {
		opts.Metrics = c.Registry()
	}
	h, err := api.NewHandler(opts)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, logs: logs}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body may be nil, a string/[]byte (sent as is) or a value (JSON).
// The request and the response are checked against the OpenAPI document
// (validateExchange).
func (e *env) do(method, path string, body any, hdr ...string) resp {
	e.t.Helper()
	var data []byte
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		data, ct = []byte(b), "application/json"
	case []byte:
		data, ct = b, "application/json"
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			e.t.Fatal(err)
		}
		ct = "application/json"
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if e.tok != "" {
		req.Header.Set("Authorization", "Bearer "+e.tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := resp{status: res.StatusCode, header: res.Header, body: got}
	validateExchange(e.t, req, data, out)
	return out
}

// apiErr decodes an error body, failing the test if it is not apiv1.Error JSON.
func (r resp) apiErr(t *testing.T) apiv1.ErrorBody {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type = %q, want application/json; body %s", ct, r.body)
	}
	var e apiv1.Error
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" {
		t.Fatalf("body is not an APIError (%v): %s", err, r.body)
	}
	return e.Error
}

func decode[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.body)
	}
	return v
}

// validJob is a job the controller accepts.
func validJob(name string) map[string]any {
	return map[string]any{
		"name":     name,
		"handler":  "exec",
		"payload":  map[string]any{"command": "/bin/true"},
		"schedule": map[string]any{"every": "1h"},
		"target":   map[string]any{"agent": "edge-7"},
	}
}
