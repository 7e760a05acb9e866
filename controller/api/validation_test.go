package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/axsched/ax/pkg/apiv1"
)

// with returns validJob with top-level keys replaced (nil deletes).
func with(kv ...any) map[string]any {
	j := validJob("v")
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(j, kv[i].(string))
		} else {
			j[kv[i].(string)] = kv[i+1]
		}
	}
	return j
}

type m = map[string]any

// rawJob is a valid job body as raw JSON with key set to the raw JSON
// value, for bytes json.Marshal would not send.
func rawJob(key, value string) string {
	data, _ := json.Marshal(with(key, nil))
	return `{"` + key + `":` + value + "," + string(data[1:])
}

// TestCreateValidation sends bad create requests over HTTP: each gets a 4xx
// APIError naming the field, and nothing is created.
func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	bigPayload := m{"command": "/bin/true", "stdin": strings.Repeat("x", 33<<10)}
	tests := []struct {
		name   string
		body   any
		ct     string // Content-Type; "" keeps application/json, "-" removes it
		status int
		field  string
	}{
		{"bad cron minute", with("schedule", m{"cron": "61 * * * *"}), "", 400, "schedule.cron"},
		{"cron too few fields", with("schedule", m{"cron": "* *"}), "", 400, "schedule.cron"},
		{"bad timezone", with("schedule", m{"cron": "0 2 * * *", "timezone": "Mars/Olympus_Mons"}), "", 400, "schedule.timezone"},
		{"two schedule kinds", with("schedule", m{"every": "5m", "cron": "* * * * *"}), "", 400, "schedule"},
		{"no schedule kind", with("schedule", m{}), "", 400, "schedule"},
		{"every not a duration", with("schedule", m{"every": "banana"}), "", 400, "schedule.every"},
		{"at not RFC3339", with("schedule", m{"at": "tomorrow 2am"}), "", 400, "schedule.at"},
		{"unknown field", with("nmae", "x"), "", 400, "nmae"},
		{"unknown schedule field", with("schedule", m{"every": "5m", "jitter": "1s"}), "", 400, "schedule.jitter"},
		{"unknown retry field", with("retry", m{"max_atempts": 3}), "", 400, "retry.max_atempts"},
		{"name not UTF-8", rawJob("name", "\"valve\xff\""), "", 400, "name"},
		{"idempotency key not UTF-8", rawJob("idempotency_key", "\"k-\xfe\""), "", 400, "idempotency_key"},
		{"idempotency key lone surrogate", rawJob("idempotency_key", `"k-\udc00"`), "", 400, "idempotency_key"},
		{"payload over 32 KiB", with("payload", bigPayload), "", http.StatusRequestEntityTooLarge, "payload"},
		{"negative timeout", with("timeout", "-5s"), "", 400, "timeout"},
		{"timeout over max", with("timeout", "200h"), "", 400, "timeout"},
		{"timeout as number", with("timeout", 30), "", 400, "timeout"},
		{"no target", with("target", m{}), "", 400, "target"},
		{"agent and group", with("target", m{"agent": "edge-7", "group": "site=a"}), "", 400, "target"},
		{"unknown target mode", with("target", m{"group": "site=a", "mode": "some"}), "", 400, "target.mode"},
		{"mode with agent", with("target", m{"agent": "edge-7", "mode": "all"}), "", 400, "target.mode"},
		{"bad group selector", with("target", m{"group": "site"}), "", 400, "target.group"},
		{"unsafe agent id", with("target", m{"agent": "edge 7/../x"}), "", 400, "target.agent"},
		{"agent id with subject dot", with("target", m{"agent": "edge.7"}), "", 400, "target.agent"},
		{"agent id wildcard", with("target", m{"agent": "edge-*"}), "", 400, "target.agent"},
		{"missing name", with("name", nil), "", 400, "name"},
		{"control char in name", with("name", "a\x01b"), "", 400, "name"},
		{"unsafe handler", with("handler", "ex ec"), "", 400, "handler"},
		{"priority too high", with("priority", 10), "", 400, "priority"},
		{"priority not a number", with("priority", "high"), "", 400, "priority"},
		{"retry max below base", with("retry", m{"max_attempts": 3, "base": "10s", "max": "1s"}), "", 400, "retry.max"},
		{"negative attempts", with("retry", m{"max_attempts": -1}), "", 400, "retry.max_attempts"},
		{"overlap unknown", with("overlap", "sometimes"), "", 400, "overlap"},
		{"precision unknown", with("precision", "ultra"), "", 400, "precision"},
		{"misfire unknown", with("misfire", m{"policy": "later"}), "", 400, "misfire.policy"},
		{"concurrency too high", with("concurrency", 5000), "", 400, "concurrency"},
		{"idempotency key too long", with("idempotency_key", strings.Repeat("k", 300)), "", 400, "idempotency_key"},
		{"id on create", with("id", "ax-t1-20260101000000-aaaaaa"), "", 400, "id"},
		{"generation on create", with("generation", 3), "", 400, "generation"},
		{"body over 64 KiB", `{"name":"` + strings.Repeat("x", 70<<10) + `"}`, "", http.StatusRequestEntityTooLarge, "body"},
		{"malformed JSON", `{"name":`, "", 400, "body"},
		{"not JSON at all", `name: x`, "", 400, "body"},
		{"trailing data", `{"name":"a"} {}`, "", 400, "body"},
		{"array instead of object", `[]`, "", 400, "(root)"},
		{"empty body", ``, "", 400, "body"},
		{"wrong content type", with(), "text/plain", http.StatusUnsupportedMediaType, "Content-Type"},
		{"form content type", with(), "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "Content-Type"},
		{"no content type", with(), "-", http.StatusUnsupportedMediaType, "Content-Type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			switch tc.ct {
			case "":
			case "-":
				hdr = []string{"Content-Type", ""}
			default:
				hdr = []string{"Content-Type", tc.ct}
			}
			r := e.do("POST", "/v1/jobs", tc.body, hdr...)
			t.Logf("%d %s", r.status, r.body)
			ae := r.apiErr(t)
			if r.status != tc.status {
				t.Errorf("status = %d, want %d (%s)", r.status, tc.status, r.body)
			}
			if ae.Field != tc.field {
				t.Errorf("field = %q, want %q (%s)", ae.Field, tc.field, r.body)
			}
			if ae.Message == "" {
				t.Error("empty message")
			}
		})
	}
	if len(tests) < 25 {
		t.Fatalf("only %d cases", len(tests))
	}
	r := e.do("GET", "/v1/jobs", nil)
	if l := decode[apiv1.JobList](t, r); len(l.Jobs) != 0 {
		t.Fatalf("bad requests created jobs: %s", r.body)
	}
	r = e.do("GET", "/v1/executions", nil)
	if l := decode[apiv1.ExecutionList](t, r); len(l.Executions) != 0 {
		t.Fatalf("bad requests created executions: %s", r.body)
	}
}

// TestQueryAndPathValidation: bad query parameters and path ids are 400s
// naming the parameter; unknown routes and actions are JSON 404/405.
func TestQueryAndPathValidation(t *testing.T) {
	e := newEnv(t)
	const goodID = "ax-t1-20260101000000-aaaaaa"
	tests := []struct {
		method, path string
		status       int
		field        string
	}{
		{"GET", "/v1/jobs?limit=0", 400, "limit"},
		{"GET", "/v1/jobs?limit=abc", 400, "limit"},
		{"GET", "/v1/jobs?limit=5000", 400, "limit"},
		{"GET", "/v1/jobs?bogus=1", 400, "bogus"},
		{"GET", "/v1/jobs?name=a&name=b", 400, "name"},
		{"GET", "/v1/jobs?paused=maybe", 400, "paused"},
		{"GET", "/v1/jobs?handler=ex%20ec", 400, "handler"},
		{"GET", "/v1/jobs?agent=a.b", 400, "agent"},
		{"GET", "/v1/jobs?group=site", 400, "group"},
		{"GET", "/v1/jobs?after=%01", 400, "after"},
		{"GET", "/v1/executions?state=DONE", 400, "state"},
		{"GET", "/v1/executions?job=nope", 400, "job"},
		{"GET", "/v1/executions?agent=a/b", 400, "agent"},
		{"GET", "/v1/executions?limit=-1", 400, "limit"},
		{"GET", "/v1/executions?from=yesterday", 400, "from"},
		{"GET", "/v1/executions?to=2026-13-01T00:00:00Z", 400, "to"},
		{"GET", "/v1/executions?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", 400, "to"},
		{"GET", "/v1/agents?x=1", 400, "x"},
		{"GET", "/v1/jobs/not-an-id", 400, "id"},
		{"PUT", "/v1/jobs/not-an-id", 400, "id"},
		{"DELETE", "/v1/jobs/not-an-id", 400, "id"},
		{"POST", "/v1/jobs/not-an-id:pause", 400, "id"},
		{"GET", "/v1/executions/xyz", 400, "id"},
		{"POST", "/v1/executions/xyz:retry", 400, "id"},
		{"POST", "/v1/jobs/" + goodID + ":explode", 404, "action"},
		{"POST", "/v1/executions/" + goodID + "-1000:explode", 404, "action"},
		{"GET", "/v1/jobs/" + goodID, 404, ""},
		{"POST", "/v1/jobs/" + goodID + ":trigger", 404, ""},
		{"GET", "/v1/executions/" + goodID + "-1000", 404, ""},
		{"POST", "/v1/executions/" + goodID + "-1000:retry", 404, ""},
		{"GET", "/v2/jobs", 404, ""},
		{"PATCH", "/v1/jobs", 405, ""},
		{"POST", "/v1/jobs/" + goodID, 405, ""},
		{"DELETE", "/v1/agents", 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil)
			ae := r.apiErr(t)
			if r.status != tc.status || ae.Field != tc.field {
				t.Fatalf("got %d field %q, want %d field %q: %s", r.status, ae.Field, tc.status, tc.field, r.body)
			}
			if r.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow header")
			}
		})
	}
}

// TestQueryOnRouteWithoutParameters: a query parameter on a route that
// takes none is a 400 naming the parameter and saying the route takes
// none (not an empty list of allowed names).
func TestQueryOnRouteWithoutParameters(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/v1/jobs/ax-t1-20260101000000-aaaaaa?verbose=1", nil)
	ae := r.apiErr(t)
	if r.status != 400 || ae.Field != "verbose" {
		t.Fatalf("got %d field %q, want 400 field verbose: %s", r.status, ae.Field, r.body)
	}
	if !strings.Contains(ae.Message, "takes none") {
		t.Fatalf("message %q does not say the route takes no parameters", ae.Message)
	}
}
