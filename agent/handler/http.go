package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/retry"
)

// HTTPConfig configures the http handler.
type HTTPConfig struct {
	// Allow lists the URLs that may be called, e.g.
	// "https://api.example.com/v1": scheme, host and port match exactly
	// (default ports filled in), the path by whole segments (see
	// CheckAllowURL for what an entry may be).
	Allow []string
	// Tail bounds the response body kept in the result (default DefaultTail).
	Tail int
	// Client is the HTTP client (default: a client with its own transport
	// that keeps IdlePerHost connections to each host alive; either way
	// it follows redirects to allowed URLs only).
	Client *http.Client
	// IdlePerHost is how many idle connections to one host the default
	// client keeps for reuse (default DefaultIdlePerHost). The agent sets
	// its worker count: with fewer, workers calling one host at once
	// (a device's local API, a site's gateway) close the connections past
	// it after each call and dial, and for https shake hands, anew for
	// the next.
	IdlePerHost int
	// Now reads the clock, for Retry-After dates without a Date header
	// (default time.Now).
	Now func() time.Time
}

// HTTPPayload is the payload of an http job (payload.HTTP).
type HTTPPayload = payload.HTTP

// HTTP calls allowed URLs.
type HTTP struct {
	cfg    HTTPConfig
	allow  []allowedURL
	client *http.Client
	bufs   copyBufs // what response bodies are read through (tail.go)
}

// DefaultIdlePerHost is HTTPConfig.IdlePerHost's default.
const DefaultIdlePerHost = 8

// maxRedirects bounds the redirects followed.
const maxRedirects = 5

// NewHTTP validates cfg and returns the http handler.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	h := &HTTP{cfg: cfg}
	for i, p := range cfg.Allow {
		a, err := parseAllowURL(p)
		if err != nil {
			return nil, fmt.Errorf("%w: http.allow[%d]: %q %v", ErrConfig, i, p, err)
		}
		h.allow = append(h.allow, a)
	}
	if h.cfg.Tail <= 0 {
		h.cfg.Tail = DefaultTail
	}
	if h.cfg.Now == nil {
		h.cfg.Now = time.Now
	}
	var c http.Client
	if cfg.Client != nil {
		c = *cfg.Client
	} else {
		if h.cfg.IdlePerHost <= 0 {
			h.cfg.IdlePerHost = DefaultIdlePerHost
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = h.cfg.IdlePerHost
		t.MaxIdleConns = max(t.MaxIdleConns, h.cfg.IdlePerHost)
		c.Transport = t
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return errors.New("too many redirects")
		}
		if err := allowMatch(h.allow, req.URL); err != nil {
			return fmt.Errorf("redirect to %q: %w", req.URL.Redacted(), err)
		}
		return nil
	}
	h.client = &c
	return h, nil
}

// Allowed reports whether raw may be called: its scheme, host and port are
// those of an http.allow entry and its path is below the entry's path,
// segment by segment; it has no user info, dot segments or encoded
// slashes.
func (h *HTTP) Allowed(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && allowMatch(h.allow, u) == nil
}

// DecodeHTTPPayload decodes and checks an http payload
// (payload.DecodeHTTP, which the controller runs on the job too).
func DecodeHTTPPayload(b []byte) (HTTPPayload, error) { return payload.DecodeHTTP(b) }

// Run runs one attempt (a Func). 2xx is a success; otherwise retry.ClassifyHTTP
// says whether a retry can help, and a retryable response's Retry-After
// is returned as RetryAfter. A payload, URL, header or redirect target
// that is refused fails for good, before or instead of the call.
func (h *HTTP) Run(ctx context.Context, req Task) Result {
	p, err := DecodeHTTPPayload(req.Payload)
	if err != nil {
		return refused("%s", err)
	}
	u := p.ParsedURL()
	if err := allowMatch(h.allow, u); err != nil {
		return refused("url %q: %v", u.Redacted(), err)
	}
	hreq, err := http.NewRequestWithContext(ctx, p.Method, p.URL, strings.NewReader(p.Body))
	if err != nil {
		return refused("request: %v", err)
	}
	for k, v := range p.Headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("X-Ax-Exec-Id", req.ExecID)
	hreq.Header.Set("X-Ax-Attempt", fmt.Sprint(req.Attempt))
	resp, err := h.client.Do(hreq)
	if err != nil {
		if errors.Is(err, ErrNotAllowed) { // a redirect target outside http.allow
			res := refused("%v", err)
			if resp != nil {
				res.Code = resp.StatusCode
			}
			return res
		}
		return Result{Outcome: retry.OutcomeFailure, Code: -1, Message: "request failed: " + err.Error(), Retryable: true}
	}
	defer resp.Body.Close()
	body := newTail(h.cfg.Tail, &h.bufs)
	_, _ = io.Copy(body, io.LimitReader(resp.Body, 16<<20))
	res := withRecord(retry.HTTPOutcome(resp.StatusCode), retry.ClassifyHTTP(resp.StatusCode))
	if res.Retryable {
		res.RetryAfter = retryAfter(resp.Header, h.cfg.Now())
	}
	msg := resp.Status
	if res.RetryAfter > 0 {
		msg += fmt.Sprintf(" (Retry-After %s)", res.RetryAfter)
	}
	if s := body.String(); s != "" {
		msg += "\nbody: " + s
	}
	res.Message = msg
	return res
}
