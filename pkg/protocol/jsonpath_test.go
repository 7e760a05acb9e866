package protocol

import (
	"strings"
	"testing"
)

// jobJSON is a valid job body with the fields given as raw JSON added.
func jobJSON(extra string) []byte {
	s := `{"handler":"exec","schedule":{"every":"1m"},"target":{"agent":"edge-7"}`
	if extra != "" {
		s += "," + extra
	}
	if !strings.Contains(extra, `"name"`) {
		s += `,"name":"n"`
	}
	return []byte(s + "}")
}

// TestBadTextNamesTheField: a string that is not valid UTF-8 or holds an
// unpaired surrogate escape is refused before decoding (which would turn
// it into U+FFFD), naming the field.
func TestBadTextNamesTheField(t *testing.T) {
	tests := []struct {
		name, extra, field string
	}{
		{"name invalid byte", "\"name\":\"valve\xff\"", "name"},
		{"name truncated rune", "\"name\":\"valve\xc3\"", "name"},
		{"idempotency_key invalid byte", "\"idempotency_key\":\"k-\xfe\"", "idempotency_key"},
		{"idempotency_key lone high surrogate", `"idempotency_key":"k-\ud800"`, "idempotency_key"},
		{"idempotency_key lone low surrogate", `"idempotency_key":"k-\udc00x"`, "idempotency_key"},
		{"idempotency_key reversed pair", `"idempotency_key":"k-\udc00\ud800"`, "idempotency_key"},
		{"nested in payload", "\"payload\":{\"args\":[\"a\",\"\xff\"]}", "payload.args[1]"},
		{"key of a nested object", "\"payload\":{\"a\xff\":1}", "payload"},
		{"key at the top", "\"na\xffme\":\"n\"", "(root)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJob(jobJSON(tc.extra))
			wantField(t, err, ErrInvalid, tc.field)
		})
	}
	// Two keys that differ only in their bad bytes decoded to one value.
	for _, b := range []string{"\xff", "\xfe", `\ud800`, `\udbff`} {
		_, err := DecodeJob(jobJSON(`"idempotency_key":"k-` + b + `"`))
		wantField(t, err, ErrInvalid, "idempotency_key")
	}
	// Wire messages are checked the same way.
	_, err := DecodeRegister([]byte("{\"v\":" + itoa(Version) + ",\"agent\":\"edge-7\",\"version\":\"1.0\xff\",\"sent_at\":\"2026-01-01T00:00:00Z\"}"))
	wantField(t, err, ErrInvalid, "version")
}

// TestGoodTextAccepted: valid multi-byte text, surrogate pairs, an escaped
// backslash before "u" and a literal U+FFFD are fine.
func TestGoodTextAccepted(t *testing.T) {
	for _, extra := range []string{
		`"name":"Ventil Süd – 弁"`,
		`"idempotency_key":"k-\ud83d\ude00"`,
		`"idempotency_key":"k-\\ud800"`,
		`"idempotency_key":"k-\ufffd"`,
		`"name":"k-` + "\uFFFD" + `"`,
	} {
		if _, err := DecodeJob(jobJSON(extra)); err != nil {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

// TestUnknownFieldNamesFullPath: an unknown field is named with its
// parents, as users write it.
func TestUnknownFieldNamesFullPath(t *testing.T) {
	tests := []struct {
		name, data, field string
	}{
		{"top", string(jobJSON(`"nmae":"x"`)), "nmae"},
		{"schedule", `{"name":"n","handler":"exec","schedule":{"evry":"1m"},"target":{"agent":"edge-7"}}`, "schedule.evry"},
		{"retry", string(jobJSON(`"retry":{"max_atempts":3}`)), "retry.max_atempts"},
		{"misfire", string(jobJSON(`"misfire":{"polcy":"skip"}`)), "misfire.polcy"},
		{"target after a known key", `{"name":"n","handler":"exec","schedule":{"every":"1m"},"target":{"agent":"edge-7","grop":"a=b"}}`, "target.grop"},
		{"register lease in a list", `{"v":VERSION,"agent":"a","sent_at":"2026-01-01T00:00:00Z","leases":[{"job_id":"x","epoch":1},{"job_id":"x","epoch":1,"epok":2}]}`, "leases[1].epok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if strings.HasPrefix(tc.data, `{"v"`) {
				_, err = DecodeRegister([]byte(strings.Replace(tc.data, "VERSION", itoa(Version), 1)))
			} else {
				_, err = DecodeJob([]byte(tc.data))
			}
			wantField(t, err, ErrInvalid, tc.field)
		})
	}
	// encoding/json matches field names case-insensitively: so does the path.
	if _, err := DecodeJob(jobJSON(`"Priority":3`)); err != nil {
		t.Fatalf("case-insensitive known field refused: %v", err)
	}
}

func TestLabelChange(t *testing.T) {
	c, err := DecodeLabelChange([]byte(`{"set":{"role":"pump"},"remove":["old"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Apply(map[string]string{"old": "x", "site": "a"})
	if len(got) != 2 || got["role"] != "pump" || got["site"] != "a" {
		t.Fatalf("Apply = %v", got)
	}
	if got := (LabelChange{Remove: []string{"a"}}).Apply(map[string]string{"a": "1"}); got != nil {
		t.Fatalf("Apply removing the last label = %v, want nil", got)
	}
	tests := []struct {
		data, field string
	}{
		{`{}`, "set"},
		{`{"set":{"bad key":"x"}}`, "set"},
		{`{"set":{"k":"bad value"}}`, "set.k"},
		{`{"remove":["a","a"]}`, "remove[1]"},
		{`{"set":{"a":"1"},"remove":["a"]}`, "remove[0]"},
		{`{"remove":[""]}`, "remove[0]"},
		{`{"sett":{"a":"1"}}`, "sett"},
	}
	for _, tc := range tests {
		_, err := DecodeLabelChange([]byte(tc.data))
		wantField(t, err, ErrInvalid, tc.field)
	}
}
