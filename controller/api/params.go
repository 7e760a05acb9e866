package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// maxCursorLen bounds the after cursor (the page sizes are apiv1's).
const maxCursorLen = 512

func invalidf(field, format string, args ...any) error {
	return &protocol.FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: protocol.ErrInvalid}
}

// query checks that q holds only allowed parameters, each at most once.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidf("query", "malformed query string: %v", err)
	}
	for k, v := range q {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok && len(allowed) == 0 {
			return nil, invalidf(k, "unknown query parameter (this route takes none)")
		}
		if !ok {
			return nil, invalidf(k, "unknown query parameter (allowed: %s)", strings.Join(allowed, ", "))
		}
		if len(v) > 1 {
			return nil, invalidf(k, "given %d times, at most once allowed", len(v))
		}
	}
	return q, nil
}

// paging reads limit and after.
func paging(q url.Values) (limit int, after string, err error) {
	limit = apiv1.DefaultListLimit
	if s := q.Get("limit"); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > apiv1.MaxListLimit {
			return 0, "", invalidf("limit", "must be an integer between 1 and %d, got %q", apiv1.MaxListLimit, s)
		}
		limit = n
	}
	after = q.Get("after")
	if len(after) > maxCursorLen || !utf8.ValidString(after) {
		return 0, "", invalidf("after", "is not a cursor returned as next by this API")
	}
	for _, r := range after {
		if r < 0x20 || r == 0x7f {
			return 0, "", invalidf("after", "is not a cursor returned as next by this API")
		}
	}
	return limit, after, nil
}

// readBody reads a JSON request body of at most protocol.MaxMessageSize.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyMax(w, r, protocol.MaxMessageSize)
}

// readBodyMax is readBody with a limit of max bytes.
func readBodyMax(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return nil, &mediaTypeError{got: ct}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &protocol.FieldError{Field: "body", Reason: fmt.Sprintf("request body is over %d bytes", mbe.Limit), Err: protocol.ErrTooLarge}
	}
	if err != nil {
		return nil, invalidf("body", "cannot read the request body: %v", err)
	}
	return body, nil
}

// mediaTypeError is a request body that is not application/json.
type mediaTypeError struct{ got string }

func (e *mediaTypeError) Error() string {
	if e.got == "" {
		return "Content-Type: is required and must be application/json"
	}
	return fmt.Sprintf("Content-Type: must be application/json, got %q", e.got)
}

// Unwrap makes the error an invalid-request error.
func (e *mediaTypeError) Unwrap() error { return protocol.ErrInvalid }

// jobID reads and validates the {id} of a job path.
func jobIDParam(id string) error { return protocol.ValidateJobID("id", id) }

// execIDParam validates the {id} of an execution path.
func execIDParam(id string) error {
	_, _, err := protocol.ParseExecID("id", id)
	return err
}

// splitAction splits "{id}:{action}" on the last ':'.
func splitAction(s string) (id, action string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
