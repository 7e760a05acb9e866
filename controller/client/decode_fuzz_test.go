package client

import (
	"errors"
	"net/http"
	"testing"
)

// FuzzDecodeAPIError: any error answer becomes an *APIError with the
// status, whatever its body.
func FuzzDecodeAPIError(f *testing.F) {
	f.Add(400, `{"error":{"code":"invalid","message":"schedule.cron: bad","field":"schedule.cron"}}`)
	f.Add(409, `{"error":{"code":"already_exists","message":"x","id":"ax-a-20260101000000-aaaaaa"}}`)
	f.Add(502, `<html>bad gateway</html>`)
	f.Add(404, `{"error":null}`)
	f.Add(500, ``)
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 400 || status > 599 {
			return
		}
		err := decodeAPIError(&http.Response{StatusCode: status, Header: http.Header{}}, []byte(body))
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status || ae.Code == "" && ae.Message == "" {
			t.Fatalf("%d %q: %#v", status, body, err)
		}
		_ = ae.Error()
		if fe, ok := ae.FieldError(); ok && fe.Field != ae.Field {
			t.Fatalf("FieldError field %q, want %q", fe.Field, ae.Field)
		}
	})
}
