package handler

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// validHeaderName reports whether s is an HTTP field name: a token
// (RFC 9110 §5.1).
func validHeaderName(s string) bool {
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

// validHeaderValue reports whether s may be an HTTP field value: no
// control character but horizontal tab (RFC 9110 §5.5).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// retryAfter is the wait a response's Retry-After asks for: delay-seconds,
// or an HTTP date taken relative to the response's Date (the server's
// clock) or, without one, to now. 0 when absent, invalid or in the past;
// at most retry.MaxDelayLimit.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(retry.MaxDelayLimit/time.Second) {
			return retry.MaxDelayLimit
		}
		d = time.Duration(n) * time.Second
	} else {
		t, err := http.ParseTime(v)
		if err != nil {
			return 0
		}
		if date, err := http.ParseTime(h.Get("Date")); err == nil {
			now = date
		}
		d = t.Sub(now)
	}
	return min(max(d, 0), retry.MaxDelayLimit)
}
