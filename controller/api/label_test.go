package api_test

import (
	"net/http"
	"testing"
)

// TestLabelRoute: POST /v1/agents/{id}:label validates its body (400
// naming the field) and answers 404 for an agent the controller does not
// know.
func TestLabelRoute(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, path string
		body       any
		status     int
		field      string
	}{
		{"unknown agent", "/v1/agents/nobody:label", m{"set": m{"site": "a"}}, http.StatusNotFound, ""},
		{"no change", "/v1/agents/edge-1:label", m{}, 400, "set"},
		{"bad label value", "/v1/agents/edge-1:label", m{"set": m{"site": "a b"}}, 400, "set.site"},
		{"remove twice", "/v1/agents/edge-1:label", m{"remove": []string{"a", "a"}}, 400, "remove[1]"},
		{"unknown field", "/v1/agents/edge-1:label", m{"labels": m{"a": "b"}}, 400, "labels"},
		{"not UTF-8", "/v1/agents/edge-1:label", "{\"remove\":[\"a\xff\"]}", 400, "remove[0]"},
		{"bad id", "/v1/agents/edge.1:label", m{"set": m{"a": "b"}}, 400, "id"},
		{"no body", "/v1/agents/edge-1:label", "", 400, "body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", tc.path, tc.body)
			ae := r.apiErr(t)
			if r.status != tc.status || ae.Field != tc.field {
				t.Fatalf("%d %s; want %d on field %q", r.status, r.body, tc.status, tc.field)
			}
		})
	}
}
