package handler

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// allowedURL is one http.allow entry: scheme, host and port are matched
// exactly, the path by whole segments.
type allowedURL struct {
	scheme, host, port string
	// segs are the path segments; none: every path of the origin.
	segs []string
	// dir: the path ends in "/", so it admits what is below it only
	// (/v1/ admits /v1/ and /v1/x, not /v1).
	dir bool
}

// CheckAllowURL reports why s cannot be an http.allow entry, or nil. An
// entry is an http or https URL with a host, an optional port and an
// optional path, written without ambiguity: no user info, query, fragment,
// wildcard, backslash, percent-encoding, empty or dot path segment, or
// host ending in a dot; ASCII only (an IDN host in punycode).
func CheckAllowURL(s string) error {
	_, err := parseAllowURL(s)
	return err
}

func parseAllowURL(s string) (allowedURL, error) {
	var a allowedURL
	switch {
	case s == "":
		return a, errors.New("is empty")
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0:
		return a, errors.New("must be ASCII without spaces or control characters (an IDN host in punycode)")
	case strings.Contains(s, "*"):
		return a, errors.New("wildcards are not supported: list each URL")
	case strings.Contains(s, "?"):
		return a, errors.New("must not have a query")
	case strings.Contains(s, "#"):
		return a, errors.New("must not have a fragment")
	case strings.Contains(s, `\`):
		return a, errors.New("must not contain a backslash")
	case strings.Contains(s, "%"):
		return a, errors.New("must not be percent-encoded")
	}
	lower := strings.ToLower(s)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return a, errors.New("must start with http:// or https://")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return a, fmt.Errorf("is not a URL: %v", err)
	}
	if u.User != nil {
		return a, errors.New("must not have user info (user@)")
	}
	if strings.HasSuffix(u.Host, ":") {
		return a, errors.New("has an empty port")
	}
	a.scheme, a.host, a.port, err = origin(u)
	if err != nil {
		return a, err
	}
	if strings.HasSuffix(a.host, ".") {
		return a, errors.New("host must not end with a dot")
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p == "" {
		return a, nil
	}
	p, a.dir = strings.CutSuffix(p, "/")
	a.segs = strings.Split(p, "/")
	for _, seg := range a.segs {
		switch seg {
		case "":
			return a, errors.New("has an empty path segment (//)")
		case ".", "..":
			return a, errors.New("has a dot segment (. or ..) in its path")
		}
	}
	return a, nil
}

// origin returns u's scheme, lower-case host (no brackets) and port (the
// scheme's default when none is given).
func origin(u *url.URL) (scheme, host, port string, err error) {
	scheme = strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return "", "", "", errors.New("has no host")
	}
	if strings.Contains(u.Host, "%") {
		return "", "", "", errors.New("host must not be percent-encoded")
	}
	host = strings.ToLower(u.Hostname())
	port = u.Port()
	switch {
	case port == "" && scheme == "http":
		port = "80"
	case port == "":
		port = "443"
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", "", "", fmt.Errorf("port %q is not between 1 and 65535", port)
		}
		port = strconv.Itoa(n) // "080" is 80
	}
	return scheme, host, port, nil
}

// allowMatch reports whether u may be called under entries, or why not
// (errors wrap ErrNotAllowed). The path of u must not hide its segments: no
// dot segment, no encoded '/' or '\', no backslash.
func allowMatch(entries []allowedURL, u *url.URL) error {
	if u.User != nil {
		return fmt.Errorf("%w: URL has user info", ErrNotAllowed)
	}
	scheme, host, port, err := origin(u)
	if err != nil {
		return fmt.Errorf("%w: URL %v", ErrNotAllowed, err)
	}
	if esc := strings.ToLower(u.EscapedPath()); strings.Contains(esc, "%2f") || strings.Contains(esc, "%5c") || strings.Contains(u.Path, `\`) {
		return fmt.Errorf("%w: URL path has an encoded / or a backslash", ErrNotAllowed)
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if slices.Contains(segs, ".") || slices.Contains(segs, "..") {
		return fmt.Errorf("%w: URL path has a dot segment (. or ..)", ErrNotAllowed)
	}
	for _, a := range entries {
		if a.scheme == scheme && a.host == host && a.port == port &&
			(len(segs) > len(a.segs) || !a.dir && len(segs) == len(a.segs)) && slices.Equal(segs[:len(a.segs)], a.segs) {
			return nil
		}
	}
	return fmt.Errorf("%w: no entry matches", ErrNotAllowed)
}
