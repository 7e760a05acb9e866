package payload

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeExec: any input either decodes to a payload that passes the
// rules again once encoded, or fails with a FieldError; never a panic.
func FuzzDecodeExec(f *testing.F) {
	for _, s := range []string{`{"command":"/bin/true"}`, `{"command":"/opt/x","args":["-a"],"env":{"MODE":"1"},"stdin":"s","dir":"/tmp"}`,
		`{}`, `{"command":"rel"}`, `{"command":"/bin/true","env":{"AX_X":"1"}}`, `null`, ``, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeExec(b)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no FieldError", err)
			}
			return
		}
		again, _ := json.Marshal(p)
		if _, err := DecodeExec(again); err != nil {
			t.Fatalf("accepted %q, its re-encoding %s refused: %v", b, again, err)
		}
	})
}

// FuzzDecodeHTTP: as FuzzDecodeExec, for http payloads.
func FuzzDecodeHTTP(f *testing.F) {
	for _, s := range []string{`{"url":"https://a.example/x"}`, `{"url":"http://h:1/p?q=1","method":"POST","headers":{"X-A":"1"},"body":"b"}`,
		`{}`, `{"url":"ftp://x/"}`, `{"url":"https://a/","headers":{"A":"\n"}}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeHTTP(b)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no FieldError", err)
			}
			return
		}
		again, _ := json.Marshal(p)
		if _, err := DecodeHTTP(again); err != nil {
			t.Fatalf("accepted %q, its re-encoding %s refused: %v", b, again, err)
		}
	})
}
