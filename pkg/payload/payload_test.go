package payload

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDecodeExec: each rule of an exec payload refuses its case and names
// the field; a full payload decodes to its values.
func TestDecodeExec(t *testing.T) {
	for _, tc := range []struct {
		name, in, field string
	}{
		{"empty", ``, "payload"},
		{"null", `null`, "payload.command"},
		{"not JSON", `nope`, "payload"},
		{"no command", `{}`, "payload.command"},
		{"unknown field", `{"comand":"/bin/true"}`, "payload"},
		{"relative command", `{"command":"bin/true"}`, "payload.command"},
		{"unclean command", `{"command":"/opt/ax/../../bin/sh"}`, "payload.command"},
		{"AX_ env", `{"command":"/bin/true","env":{"AX_JOB_ID":"x"}}`, "payload.env"},
		{"= in env name", `{"command":"/bin/true","env":{"A=B":"x"}}`, "payload.env"},
		{"NUL in args", `{"command":"/bin/true","args":["a\u0000b"]}`, "payload.args"},
		{"trailing data", `{"command":"/bin/true"} {}`, "payload"},
		{"trailing bracket", `{"command":"/bin/true"}]`, "payload"},
		{"wrong type", `{"command":7}`, "payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeExec([]byte(tc.in))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeExec(%s) = %v, want a FieldError on %s wrapping ErrInvalid", tc.in, err, tc.field)
			}
		})
	}
	p, err := DecodeExec([]byte(`{"command":"/usr/local/bin/sync","args":["--full"],"stdin":"x","env":{"MODE":"fast"},"dir":"/var/lib/app"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Command != "/usr/local/bin/sync" || len(p.Args) != 1 || p.Args[0] != "--full" || p.Stdin != "x" || p.Env["MODE"] != "fast" || p.Dir != "/var/lib/app" {
		t.Fatalf("decoded %+v", p)
	}
}

// TestDecodeHTTP: each rule of an http payload refuses its case and names
// the field; the method is filled in from the body.
func TestDecodeHTTP(t *testing.T) {
	for _, tc := range []struct {
		name, in, field string
	}{
		{"no url", `{}`, "payload.url"},
		{"unknown field", `{"url":"https://a.example/","verb":"GET"}`, "payload"},
		{"bad url", `{"url":"https://a.example/%zz"}`, "payload.url"},
		{"relative url", `{"url":"/v1/hook"}`, "payload.url"},
		{"ftp", `{"url":"ftp://a.example/f"}`, "payload.url"},
		{"no host", `{"url":"http:///path"}`, "payload.url"},
		{"lower-case method", `{"url":"https://a.example/","method":"post"}`, "payload.method"},
		{"bad header name", `{"url":"https://a.example/","headers":{"X Bad":"1"}}`, "payload.headers"},
		{"CRLF in header", `{"url":"https://a.example/","headers":{"X-A":"1\r\nX-B: 2"}}`, "payload.headers[X-A]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHTTP([]byte(tc.in))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("DecodeHTTP(%s) = %v, want a FieldError on %s", tc.in, err, tc.field)
			}
		})
	}
	for in, method := range map[string]string{
		`{"url":"https://a.example/"}`:                    "GET",
		`{"url":"https://a.example/","body":"x"}`:         "POST",
		`{"url":"http://10.0.0.2:8080/x","method":"PUT"}`: "PUT",
	} {
		p, err := DecodeHTTP([]byte(in))
		if err != nil || p.Method != method {
			t.Fatalf("DecodeHTTP(%s) = %+v, %v; want method %s", in, p, err, method)
		}
		if u := p.ParsedURL(); u == nil || u.String() != p.URL {
			t.Fatalf("DecodeHTTP(%s): parsed URL %v, want %s", in, u, p.URL)
		}
	}
}

// TestValidate: exec and http payloads are checked, any other handler's
// payload is left to its handler.
func TestValidate(t *testing.T) {
	if err := Validate(HandlerExec, json.RawMessage(`{}`)); err == nil {
		t.Error("exec without a command accepted")
	}
	if err := Validate(HandlerHTTP, nil); err == nil {
		t.Error("http without a payload accepted")
	}
	if err := Validate(HandlerExec, json.RawMessage(`{"command":"/bin/true"}`)); err != nil {
		t.Errorf("a good exec payload: %v", err)
	}
	if err := Validate("valve", json.RawMessage(`{"anything":[1,2]}`)); err != nil {
		t.Errorf("a Go handler's payload: %v", err)
	}
	if err := Validate("valve", nil); err != nil {
		t.Errorf("a Go handler without payload: %v", err)
	}
}
