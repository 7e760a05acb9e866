package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// Options configure the API handler.
type Options struct {
	// Backend serves the requests; required.
	Backend Backend
	// Metrics is served on /metrics (the controller's registry); nil: /metrics answers 404.
	Metrics prometheus.Gatherer
	// Registerer receives the API's own metrics (ax_api_rejected_total);
	// nil: they are not exported.
	Registerer prometheus.Registerer
	// Tokens are the accepted bearer tokens. None: authentication is off
	// (the caller must then listen on loopback only; see RequireAuth).
	Tokens []Token
	// Logger receives audit lines and internal errors; nil: slog.Default().
	Logger *slog.Logger
}

// server is the API handler. It holds no mutable state: every request is
// served from the backend.
type server struct {
	b       Backend
	auth    *authenticator
	log     *slog.Logger
	mux     *http.ServeMux
	metrics http.Handler
	// rejected counts requests refused for their input (ax_api_rejected_total).
	rejected *prometheus.CounterVec
	// decode decodes job bodies, strictjson first (protocol.Decoder).
	decode protocol.Decoder
}

// NewHandler returns the API as an http.Handler.
func NewHandler(opts Options) (http.Handler, error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("%w: backend is required", ErrConfig)
	}
	if err := ValidateTokens(opts.Tokens); err != nil {
		return nil, err
	}
	rejected, err := newRejected(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &server{
		b:      opts.Backend,
		auth:   newAuthenticator(append([]Token(nil), opts.Tokens...)),
		decode: protocol.Decoder{Fast: strictjson.Unmarshal},
		log:    opts.Logger,
		mux:    http.NewServeMux(),
	}
	s.rejected = rejected
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Metrics != nil {
		s.metrics = promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{})
	}
	s.routes()
	return s, nil
}

func (s *server) routes() {
	m := s.mux
	m.HandleFunc("POST /v1/jobs", s.createJob)
	m.HandleFunc("POST /v1/jobs:batch", s.createJobs)
	m.HandleFunc("GET /v1/jobs", s.listJobs)
	m.HandleFunc("GET /v1/jobs/{id}", s.getJob)
	m.HandleFunc("PUT /v1/jobs/{id}", s.updateJob)
	m.HandleFunc("DELETE /v1/jobs/{id}", s.deleteJob)
	m.HandleFunc("POST /v1/jobs/{idaction}", s.jobAction)
	m.HandleFunc("GET /v1/executions", s.listExecutions)
	m.HandleFunc("GET /v1/executions/{id}", s.getExecution)
	m.HandleFunc("POST /v1/executions/{idaction}", s.execAction)
	m.HandleFunc("GET /v1/agents", s.listAgents)
	m.HandleFunc("POST /v1/agents/{idaction}", s.agentAction)
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /metrics", s.serveMetrics)
	m.HandleFunc("GET /v1/openapi.yaml", s.openAPI)
}

// public routes need no token: probes must work without secrets, and the
// API's description is no secret.
func public(path string) bool { return path == "/healthz" || path == "/readyz" || path == openAPIPath }

// ServeHTTP authenticates, authorizes, audits and routes one request.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := newRequestID()
	w.Header().Set("X-Request-Id", rid)
	ctx := context.WithValue(r.Context(), ctxRequestID{}, rid)

	var rec *auditRecord
	sw := &statusWriter{ResponseWriter: w}
	if mutating(r.Method) {
		rec = &auditRecord{who: "anonymous"}
		rec.what, rec.job, rec.exec = describe(r)
		ctx = context.WithValue(ctx, ctxAudit{}, rec)
		defer func() { s.audit(r, rec, sw.status, rid) }()
	}
	r = r.WithContext(ctx)
	defer s.recoverPanic(sw, r)

	if !public(r.URL.Path) && s.auth.enabled() {
		tok, ok := s.auth.identify(r)
		if !ok {
			if rec != nil {
				rec.who = "unauthenticated"
			}
			msg := "a bearer token is required (Authorization: Bearer <token>)"
			if r.Header.Get("Authorization") != "" {
				msg = "the bearer token is not valid"
			}
			writeAPIError(sw, http.StatusUnauthorized, apiv1.ErrorBody{Code: apiv1.CodeUnauthorized, Message: msg})
			return
		}
		if rec != nil {
			rec.who = tok.Name
		}
		if tok.Role != RoleAdmin && mutating(r.Method) {
			writeAPIError(sw, http.StatusForbidden, apiv1.ErrorBody{Code: apiv1.CodeForbidden,
				Message: fmt.Sprintf("token %q has role %s, which may only read; %s needs role admin", tok.Name, tok.Role, r.Method)})
			return
		}
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(sw, r)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// noRoute answers an unmatched request with a JSON 404 or 405.
func (s *server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	cw := &captureWriter{header: http.Header{}}
	h.ServeHTTP(cw, r)
	switch cw.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", cw.header.Get("Allow"))
		writeAPIError(w, http.StatusMethodNotAllowed, apiv1.ErrorBody{Code: apiv1.CodeNotAllowed,
			Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, cw.header.Get("Allow"))})
	case http.StatusNotFound, 0:
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	default: // a redirect to the cleaned path
		for k, v := range cw.header {
			w.Header()[k] = v
		}
		w.WriteHeader(cw.status)
	}
}

func (s *server) recoverPanic(w *statusWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("api handler panic", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()),
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if w.status == 0 {
		writeAPIError(w, http.StatusInternalServerError, apiv1.ErrorBody{Code: apiv1.CodeInternal,
			Message: "internal error (request id " + requestID(r.Context()) + ")"})
	}
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.b.Ready(r.Context()); err != nil {
		status, body, ok := classify(err)
		if !ok || status != http.StatusServiceUnavailable {
			// Whatever keeps the backend from being ready, the answer is "not ready".
			s.log.Warn("api not ready", "err", err)
			body = apiv1.ErrorBody{Code: apiv1.CodeUnavailable, Message: "not ready"}
		}
		writeAPIError(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Message: "metrics are not enabled"})
		return
	}
	s.metrics.ServeHTTP(w, r)
}

type ctxRequestID struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxRequestID{}).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusWriter remembers the status written, for the audit line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// captureWriter records what the mux's own 404/405 handler writes.
type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return len(b), nil
}
