package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/axsched/ax/internal/strictjson"
)

// fast is the Decoder the controller uses.
var fast = Decoder{Fast: strictjson.Unmarshal}

// fastSeeds are messages of every kind plus text that tests where two
// JSON decoders tend to differ: case-folded and duplicate keys, numbers
// that do not fit, escapes, nulls, empty and odd containers, data after
// the value.
func fastSeeds(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	f.Add(mustJSON(f, validJob()))
	report := string(mustJSON(f, sampleMessages()["report"]))
	for _, s := range []string{
		strings.Replace(report, `"agent"`, `"AGENT"`, 1),
		strings.Replace(report, `"kind"`, `"\u212aind"`, 1), // Kelvin sign: folds to k
		strings.Replace(report, `"kind"`, "\"\u212aind\"", 1),
		strings.Replace(report, `"kind":`, "\"\u017fhard\":null,\"kind\":", 1), // long s: folds to s
		strings.Replace(report, `"agent"`, `"agent":"x","agent"`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":1.0`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":1e0`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":-0`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":99999999999999999999`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":"1"`, 1),
		strings.Replace(report, `"attempt":1`, `"attempt":null`, 1),
		strings.Replace(report, `"agent":"`, `"agent":"\u00e9\u0000\ud83d\ude00`, 1),
		strings.Replace(report, `"kind":`, `"result":null,"kind":`, 1),
		strings.Replace(report, `"kind":`, `"result":{},"kind":`, 1),
		strings.Replace(report, `"kind":`, `"shard":[],"kind":`, 1),
		strings.Replace(report, `"kind":`, `"duration":"1.5s","kind":`, 1),
		strings.Replace(report, `"kind":`, `"duration":0,"kind":`, 1),
		strings.Replace(report, `"kind":`, `"zz":{"a":[1,{"b":null}]},"kind":`, 1),
		report + " ",
		report + " {}",
		report + ",",
		"\ufeff" + report,
		`{"v":2,}`,
		`{"v":2 /* c */}`,
		`{"v":2,"payload":{"a":1}}`,
		`{"name":"n","handler":"exec","payload":{ "a" : [1, 2] },"schedule":{"every":"1m"},"target":{"agent":"a"}}`,
		`{"name":"n","handler":"exec","labels":{},"schedule":{"every":"1m"},"target":{"agent":"a"},"retry":null}`,
		`{"name":"n","handler":"exec","schedule":{"every":"1m"},"target":{"agent":"a"},"Name":"m"}`,
		`[]`, `null`, `""`, `0`, `{}`, `{"v":null}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzFastMatchesStd: the controller's Decoder (strictjson first) accepts
// exactly what the zero Decoder (encoding/json) accepts, decodes it to the
// same value and refuses the rest with the same error, for reports and
// jobs, the messages it decodes; and strictjson.Unmarshal alone accepts
// only what the strict decode of encoding/json accepts, to the same value,
// for every other message type.
func FuzzFastMatchesStd(f *testing.F) {
	fastSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r1, e1 := fast.Report(data)
		r2, e2 := DecodeReport(data)
		sameDecode(t, "report", data, r1, r2, e1, e2)
		j1, e1 := fast.Job(data)
		j2, e2 := DecodeJob(data)
		sameDecode(t, "job", data, j1, j2, e1, e2)
		for _, mk := range []func() any{
			func() any { return &Command{} }, func() any { return &Event{} },
			func() any { return &Register{} }, func() any { return &Heartbeat{} },
			func() any { return &LabelChange{} }, func() any { return &JobRetired{} },
		} {
			a, b := mk(), mk()
			if checkStrings(data) != nil || strictjson.Unmarshal(data, a) != nil {
				continue
			}
			if err := strictUnmarshal(data, b); err != nil {
				t.Fatalf("%T: strictjson accepts, encoding/json refuses (%v): %q", a, err, data)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%T: decoded differently: %q\nstrictjson %+v\nencoding/json %+v", a, data, a, b)
			}
		}
	})
}

func sameDecode[M any](t *testing.T, what string, data []byte, a, b M, errA, errB error) {
	t.Helper()
	switch {
	case (errA == nil) != (errB == nil):
		t.Fatalf("%s: fast %v, encoding/json %v: %q", what, errA, errB, data)
	case errA != nil && errA.Error() != errB.Error():
		t.Fatalf("%s: fast %q, encoding/json %q: %q", what, errA, errB, data)
	case errA == nil && !reflect.DeepEqual(a, b):
		t.Fatalf("%s: decoded differently: %q\nfast %+v\nencoding/json %+v", what, data, a, b)
	}
}

// TestFastDecoderRefusesAsStd: a message the fast decoder refuses gets
// encoding/json's error, field path included, and a good one decodes.
func TestFastDecoderRefusesAsStd(t *testing.T) {
	report := string(mustJSON(t, sampleMessages()["report"]))
	good, err := fast.Report([]byte(report))
	if err != nil {
		t.Fatalf("good report refused: %v", err)
	}
	if want, _ := DecodeReport([]byte(report)); !reflect.DeepEqual(good, want) {
		t.Fatalf("good report decoded as %+v, want %+v", good, want)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"unknown field", strings.Replace(report, `"kind":`, `"zz":1,"kind":`, 1), "zz"},
		{"wrong type", strings.Replace(report, `"attempt":1`, `"attempt":"1"`, 1), "attempt"},
		{"bad duration", strings.Replace(report, `"kind":`, `"duration":"soon","kind":`, 1), "duration"},
		{"trailing data", report + " {}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fast.Report([]byte(tc.body))
			_, want := DecodeReport([]byte(tc.body))
			if err == nil || want == nil || err.Error() != want.Error() {
				t.Fatalf("fast %v, encoding/json %v", err, want)
			}
			wantField(t, err, ErrInvalid, tc.field)
		})
	}
}
