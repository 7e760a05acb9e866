package payload

import (
	"encoding/json"
	"errors"
	"testing"
)

// fuzzDecoder fuzzes decode from seeds: any input either decodes to a
// payload whose encoding decodes again, or fails with a FieldError; never
// a panic.
func fuzzDecoder[P any](f *testing.F, decode func([]byte) (P, error), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decode(b)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no FieldError", err)
			}
			return
		}
		again, _ := json.Marshal(p)
		if _, err := decode(again); err != nil {
			t.Fatalf("accepted %q, its re-encoding %s refused: %v", b, again, err)
		}
	})
}

// FuzzDecodeExec fuzzes DecodeExec (fuzzDecoder).
func FuzzDecodeExec(f *testing.F) {
	fuzzDecoder(f, DecodeExec, `{"command":"/bin/true"}`, `{"command":"/opt/x","args":["-a"],"env":{"MODE":"1"},"stdin":"s","dir":"/tmp"}`,
		`{}`, `{"command":"rel"}`, `{"command":"/bin/true","env":{"AX_X":"1"}}`, `null`, ``, `[1]`)
}

// FuzzDecodeHTTP fuzzes DecodeHTTP (fuzzDecoder).
func FuzzDecodeHTTP(f *testing.F) {
	fuzzDecoder(f, DecodeHTTP, `{"url":"https://a.example/x"}`, `{"url":"http://h:1/p?q=1","method":"POST","headers":{"X-A":"1"},"body":"b"}`,
		`{}`, `{"url":"ftp://x/"}`, `{"url":"https://a/","headers":{"A":"\n"}}`, `null`, ``)
}
