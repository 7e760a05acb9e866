package handler

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

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
