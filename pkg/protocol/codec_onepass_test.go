package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeTwoPass is decode as it was before it parsed a message once: the
// "v" key first, then the strict decode. FuzzDecodeOnePass holds decode
// to the same answers.
func decodeTwoPass[M interface{ Validate() error }](data []byte, m M) error {
	if len(data) > MaxMessageSize {
		return fieldErrf(ErrTooLarge, "", "message is %d bytes, at most %d allowed", len(data), MaxMessageSize)
	}
	if err := headVersion(data); err != nil {
		return err
	}
	if err := strictUnmarshal(data, m); err != nil {
		return err
	}
	return m.Validate()
}

// FuzzDecodeOnePass: decode accepts, rejects (with the same error) and
// decodes exactly what the two-pass decoder did, for reports and commands.
func FuzzDecodeOnePass(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	for _, s := range []string{`{"v":2}`, `{"v":99}`, `{"v":2.5}`, `{"v":null}`, `{"v":"2"}`, `[]`, `null`, `{"v":2,"v":99}`, `{"v":99,"zz":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		same(t, data, func() *Report { return &Report{} })
		same(t, data, func() *Command { return &Command{} })
	})
}

func same[M interface{ Validate() error }](t *testing.T, data []byte, mk func() M) {
	a, b := mk(), mk()
	errA, errB := decode(data, a), decodeTwoPass(data, b)
	switch {
	case (errA == nil) != (errB == nil):
		t.Fatalf("%s: one pass %v, two passes %v", data, errA, errB)
	case errA != nil && errA.Error() != errB.Error():
		t.Fatalf("%s: one pass %q, two passes %q", data, errA, errB)
	case errA == nil && !reflect.DeepEqual(a, b):
		t.Fatalf("%s: decoded differently", data)
	}
}

// BenchmarkDecodeReport: one parse against the two-pass decoder it
// replaced, and the controller's Decoder (strictjson first).
func BenchmarkDecodeReport(b *testing.B) {
	var data []byte
	for k, m := range sampleMessages() {
		if k == "report" {
			data, _ = json.Marshal(m)
		}
	}
	for _, bc := range []struct {
		name string
		dec  func([]byte, *Report) error
	}{{"one_pass", decode[*Report]}, {"two_passes", decodeTwoPass[*Report]},
		{"fast", func(b []byte, r *Report) (err error) { *r, err = fast.Report(b); return err }}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r Report
				if err := bc.dec(data, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
