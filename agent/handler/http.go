package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/axsched/ax/pkg/retry"
)

// HTTPConfig configures the http handler.
type HTTPConfig struct {
	// Allow lists URL prefixes that may be called, e.g. "https://api.example.com/v1/".
	Allow []string
	// Tail bounds the response body kept in the result (default DefaultTail).
	Tail int
	// Client is the HTTP client (default: a client that follows redirects
	// to allowed URLs only).
	Client *http.Client
}

// HTTPPayload is the payload of an http job.
type HTTPPayload struct {
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// HTTP calls allowed URLs.
type HTTP struct {
	cfg    HTTPConfig
	client *http.Client
}

// NewHTTP validates cfg and returns the http handler.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	for i, p := range cfg.Allow {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: http.allow[%d]: %q must be an http(s) URL prefix", ErrConfig, i, p)
		}
	}
	if cfg.Tail <= 0 {
		cfg.Tail = DefaultTail
	}
	h := &HTTP{cfg: cfg, client: cfg.Client}
	if h.client == nil {
		h.client = &http.Client{}
	}
	c := *h.client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if !h.Allowed(req.URL.String()) {
			return fmt.Errorf("redirect to %q is not in http.allow", req.URL.Redacted())
		}
		return nil
	}
	h.client = &c
	return h, nil
}

// Allowed reports whether raw may be called: after removing dot segments
// it starts with an allowed prefix, and it has no user info.
func (h *HTTP) Allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	norm := u.ResolveReference(&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String()
	for _, p := range h.cfg.Allow {
		if strings.HasPrefix(norm, p) {
			return true
		}
	}
	return false
}

// DecodeHTTPPayload decodes and checks an http payload.
func DecodeHTTPPayload(b []byte) (HTTPPayload, error) {
	var p HTTPPayload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("payload: %v", err)
	}
	if p.URL == "" {
		return p, errors.New("payload.url: is required")
	}
	if p.Method == "" {
		p.Method = http.MethodGet
		if p.Body != "" {
			p.Method = http.MethodPost
		}
	}
	for _, c := range p.Method {
		if c < 'A' || c > 'Z' {
			return p, fmt.Errorf("payload.method: %q must be an upper-case HTTP method", p.Method)
		}
	}
	return p, nil
}

// Run runs one attempt.
func (h *HTTP) Run(ctx context.Context, req Request) retry.Result {
	p, err := DecodeHTTPPayload(req.Payload)
	if err != nil {
		return retry.Result{Code: -1, Message: err.Error()}
	}
	if !h.Allowed(p.URL) {
		return retry.Result{Code: -1, Message: fmt.Sprintf("url %q is not in http.allow of this agent", p.URL)}
	}
	hreq, err := http.NewRequestWithContext(ctx, p.Method, p.URL, strings.NewReader(p.Body))
	if err != nil {
		return retry.Result{Code: -1, Message: "request: " + err.Error()}
	}
	for k, v := range p.Headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("X-Ax-Exec-Id", req.ExecID)
	hreq.Header.Set("X-Ax-Attempt", fmt.Sprint(req.Attempt))
	resp, err := h.client.Do(hreq)
	if err != nil {
		return retry.Result{Code: -1, Message: "request failed: " + err.Error(), Retryable: true}
	}
	defer resp.Body.Close()
	body := newTail(h.cfg.Tail)
	_, _ = io.Copy(body, io.LimitReader(resp.Body, 16<<20))
	res := retry.ClassifyHTTP(resp.StatusCode)
	msg := resp.Status
	if s := body.String(); s != "" {
		msg += "\nbody: " + s
	}
	res.Message = msg
	return res
}
