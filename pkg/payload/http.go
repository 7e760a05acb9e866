package payload

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// HTTP is the payload of an http job.
type HTTP struct {
	// Method is an upper-case HTTP method; empty means GET, or POST when
	// Body is set (DecodeHTTP fills it in).
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL to call.
	URL string `json:"url"`
	// Headers are added to the request: names are HTTP tokens, values
	// have no control character but tab.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the request body.
	Body string `json:"body,omitempty"`

	// parsed is URL as DecodeHTTP parsed it (ParsedURL).
	parsed *url.URL
}

// ParsedURL returns URL as DecodeHTTP parsed and checked it, so that a
// caller does not parse it again; nil for a value DecodeHTTP did not make.
func (p HTTP) ParsedURL() *url.URL { return p.parsed }

// DecodeHTTP decodes and checks an http payload: JSON without unknown
// fields, an absolute http or https URL with a host, an upper-case method
// (filled in when empty), header names and values as HTTP allows.
func DecodeHTTP(b []byte) (HTTP, error) {
	var p HTTP
	if err := decodeStrict(b, &p); err != nil {
		return p, err
	}
	if p.URL == "" {
		return p, invalid("payload.url", "is required")
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return p, invalid("payload.url", err.Error())
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return p, invalid("payload.url", fmt.Sprintf("scheme %q: must be http or https", u.Scheme))
	}
	if u.Host == "" {
		return p, invalid("payload.url", "has no host")
	}
	p.parsed = u
	if p.Method == "" {
		p.Method = http.MethodGet
		if p.Body != "" {
			p.Method = http.MethodPost
		}
	}
	for _, c := range p.Method {
		if c < 'A' || c > 'Z' {
			return p, invalid("payload.method", fmt.Sprintf("%q must be an upper-case HTTP method", p.Method))
		}
	}
	for k, v := range p.Headers {
		if !ValidHeaderName(k) {
			return p, invalid("payload.headers", fmt.Sprintf("%q is not a valid header name", k))
		}
		if !ValidHeaderValue(v) {
			return p, invalid("payload.headers["+k+"]", "value has a control character (CR, LF, NUL, ...)")
		}
	}
	return p, nil
}

// ValidHeaderName reports whether s is an HTTP field name: a token
// (RFC 9110 §5.1).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether s may be an HTTP field value: no
// control character but horizontal tab (no CR or LF that would split the
// request, no NUL).
func ValidHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
