package handler

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestHTTPAllowMatch: scheme, host and port match exactly (default ports
// filled in, host case-insensitive), the path by whole segments, and a
// URL cannot hide its path from the check.
func TestHTTPAllowMatch(t *testing.T) {
	h, err := NewHTTP(HTTPConfig{Allow: []string{
		"http://allowed.example",
		"https://api.example.com/v1/",
		"http://127.0.0.1:8080/jobs",
		"https://[::1]:8443/",
		"HTTPS://Upper.Example:443/x",
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://allowed.example/", true},
		{"http://allowed.example", true},
		{"http://allowed.example:80/x", true},
		{"http://ALLOWED.example/x?q=1", true},
		{"https://api.example.com/v1", false}, // the entry is /v1/: below it only
		{"https://api.example.com/v1/", true},
		{"https://api.example.com/v1/x/y?q=1#frag", true},
		{"https://api.example.com:443/v1/x", true},
		{"http://127.0.0.1:8080/jobs/run", true},
		{"http://127.0.0.1:8080/jobs", true},
		{"http://127.0.0.1:8080/jobs/", true},
		{"https://[::1]:8443/any", true},
		{"https://upper.example/x/y", true},

		{"http://allowed.example.evil/", false},
		{"http://allowed.example.evil", false},
		{"http://allowed.example:8080/", false},
		{"https://allowed.example/", false},
		{"http://user@allowed.example/", false},
		{"http://allowed.example@evil.example/", false},
		{"http://allowed.example./", false},
		{"https://api.example.com/v10", false},
		{"https://api.example.com/v1x/y", false},
		{"https://api.example.com/", false},
		{"https://api.example.com//v1/x", false},
		{"https://api.example.com/v1/../admin", false},
		{"https://api.example.com/v1/./x", false},
		{"https://api.example.com/v1/%2e%2e/admin", false},
		{"https://api.example.com/v1%2f..%2fadmin", false},
		{"https://api.example.com/v1/x%2Fy", false},
		{`https://api.example.com/v1/x%5cy`, false},
		{"https://api.example.com:8443/v1/", false},
		{"http://127.0.0.1:8080/jobsx", false},
		{"http://127.0.0.1/jobs", false},
		{"http://127.0.0.1:80/jobs", false},
		{"https://[::1]/", false},
		{"ftp://allowed.example/", false},
		{"//allowed.example/", false},
		{"allowed.example", false},
		{"http:allowed.example", false},
		{"", false},
	} {
		if got := h.Allowed(tc.url); got != tc.want {
			t.Errorf("Allowed(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}

// TestHTTPAllowConfigErrors: an ambiguous http.allow entry is refused at
// load, naming the key and the entry.
func TestHTTPAllowConfigErrors(t *testing.T) {
	for _, tc := range []struct{ entry, why string }{
		{"", "is empty"},
		{"allowed.example", "must start with http:// or https://"},
		{"allowed.example/api", "must start with http:// or https://"},
		{"ftp://allowed.example/", "must start with http:// or https://"},
		{"javascript:alert(1)", "must start with http:// or https://"},
		{"https:/allowed.example", "must start with http:// or https://"},
		{"http:allowed.example", "must start with http:// or https://"},
		{"http://", "has no host"},
		{"http:///path", "has no host"},
		{"http://user:pw@allowed.example/", "user info"},
		{"http://allowed.example@evil.example/", "user info"},
		{"http://allowed.example/?a=1", "query"},
		{"http://allowed.example/?", "query"},
		{"http://allowed.example/#top", "fragment"},
		{"http://*.allowed.example/", "wildcard"},
		{"http://allowed.example/api/*", "wildcard"},
		{"http://allowed.example:/", "empty port"},
		{"http://allowed.example:99999/", "port"},
		{"http://allowed.example:0/", "port"},
		{"http://allowed.example/a/../b", "dot segment"},
		{"http://allowed.example/a/./b", "dot segment"},
		{"http://allowed.example//a", "empty path segment"},
		{"http://allowed.example/%2e%2e", "percent-encoded"},
		{"http://allowed.example./", "dot"},
		{"http://allowed example/", "spaces"},
		{"http://ällowed.example/", "ASCII"},
		{`http://allowed.example\evil/`, "backslash"},
	} {
		_, err := NewHTTP(HTTPConfig{Allow: []string{"https://ok.example/", tc.entry}})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "http.allow[1]") ||
			!strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), strconv.Quote(tc.entry)) {
			t.Errorf("entry %q: error %v, want ErrConfig naming http.allow[1], the entry and %q", tc.entry, err, tc.why)
		}
	}
	for _, ok := range []string{"http://a.example", "https://a.example/", "https://a.example:8443/v1", "http://[::1]:8080/x/", "HTTP://A.example/v1"} {
		if err := CheckAllowURL(ok); err != nil {
			t.Errorf("CheckAllowURL(%q) = %v, want nil", ok, err)
		}
	}
}

// FuzzHTTPAllow: no entry or URL panics the parser or the matcher; an
// accepted entry admits itself, and what it admits has its scheme, host
// and port.
func FuzzHTTPAllow(f *testing.F) {
	for _, s := range [][2]string{
		{"http://allowed.example", "http://allowed.example.evil/"},
		{"https://api.example.com/v1/", "https://api.example.com/v1/%2e%2e/admin"},
		{"http://127.0.0.1:8080/jobs", "http://127.0.0.1:8080/jobsx"},
		{"https://[::1]:8443/", "https://[::1]/"},
		{"HTTPS://Upper.Example:443/x", "https://upper.example/x/y?q#f"},
		{"http://u@a.example/", "http://a.example@b.example/"},
		{"http://a.example:080/", "http://a.example:80/"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, entry, raw string) {
		a, err := parseAllowURL(entry)
		if err != nil {
			return
		}
		self, err := url.Parse(entry)
		if err != nil {
			t.Fatalf("accepted entry %q does not parse: %v", entry, err)
		}
		if err := allowMatch([]allowedURL{a}, self); err != nil {
			t.Fatalf("entry %q does not admit itself: %v", entry, err)
		}
		u, err := url.Parse(raw)
		if err != nil || allowMatch([]allowedURL{a}, u) != nil {
			return
		}
		scheme, host, port, err := origin(u)
		if err != nil || scheme != a.scheme || host != a.host || port != a.port || u.User != nil {
			t.Fatalf("entry %q admits %q (%s %s %s, %v)", entry, raw, scheme, host, port, err)
		}
	})
}
