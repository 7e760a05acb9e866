package client

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
	"time"

	"github.com/axsched/ax/pkg/apiv1"
)

// DefaultTimeout bounds each request of a client made without WithHTTPClient.
const DefaultTimeout = 30 * time.Second

// maxResponseSize bounds a response body the client reads.
const maxResponseSize = 64 << 20

// Client calls the controller's HTTP API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	ua    string
}

// Option changes a Client made by New.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (TLS, proxies, timeouts).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// New returns a client of the API at baseURL (http://host:port, optionally
// with a path prefix). token is the bearer token; empty sends none.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configErr("base URL %q: want http://host:port or https://host:port", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, configErr("base URL %q: must not carry a query, fragment or user info", baseURL)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return nil, configErr("token: must not contain white space")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	c := &Client{base: u, token: token, hc: &http.Client{Timeout: DefaultTimeout}, ua: "ax-client"}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		return nil, configErr("http client is nil")
	}
	return c, nil
}

// BaseURL returns the API's base URL.
func (c *Client) BaseURL() string { return c.base.String() }

// do sends one request. in (if not nil) is sent as JSON; a 2xx answer is
// decoded into out (if not nil); any other answer becomes an *APIError.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	// path is already escaped (jobPath, execPath); base carries no query.
	target := c.base.String() + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in our own message
		}
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeAPIError(resp, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// decodeAPIError turns an error answer into an *APIError, also when the
// body is not the API's JSON (a proxy's error page).
func decodeAPIError(resp *http.Response, data []byte) error {
	e := &APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body struct {
		Error *apiv1.ErrorBody `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Code, e.Message, e.Field, e.ID = body.Error.Code, body.Error.Message, body.Error.Field, body.Error.ID
		if e.Code == "" {
			e.Code = codeOfStatus(resp.StatusCode)
		}
		if e.Message == "" {
			e.Message = fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		return e
	}
	e.Code = codeOfStatus(resp.StatusCode)
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e.Message = fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if msg != "" {
		e.Message += ": " + msg
	}
	return e
}

func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return apiv1.CodeInvalid
	case http.StatusUnauthorized:
		return apiv1.CodeUnauthorized
	case http.StatusForbidden:
		return apiv1.CodeForbidden
	case http.StatusNotFound:
		return apiv1.CodeNotFound
	case http.StatusConflict:
		return apiv1.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return apiv1.CodeTooLarge
	case http.StatusServiceUnavailable:
		return apiv1.CodeUnavailable
	}
	return apiv1.CodeInternal
}
