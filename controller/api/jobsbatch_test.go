package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/axsched/ax/pkg/apiv1"
)

func decodeBatch(t *testing.T, r resp) apiv1.JobBatchResult {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	var out apiv1.JobBatchResult
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("batch answer: %v: %s", err, r.body)
	}
	return out
}

// TestCreateJobsBatch: POST /v1/jobs:batch creates each job on its own,
// answers one result per job in order (a bad job gets its own 400 naming
// jobs[i].field, the others are created), and a retried batch with
// idempotency keys returns the existing jobs as 409 with their ids
// instead of making twins.
func TestCreateJobsBatch(t *testing.T) {
	e := newEnv(t)
	keyed := func(name string) map[string]any {
		j := validJob(name)
		j["idempotency_key"] = "batch/" + name
		return j
	}
	bad := validJob("bad")
	bad["schedule"] = map[string]any{"every": "banana"}
	withID := validJob("with-id")
	withID["id"] = "ax-t1-20260101000000-aaaaaa"
	batch := map[string]any{"jobs": []any{keyed("a"), keyed("b"), bad, withID, keyed("c")}}
	first := decodeBatch(t, e.do("POST", "/v1/jobs:batch", batch)).Results
	want := []struct {
		status int
		field  string
	}{{201, ""}, {201, ""}, {400, "jobs[2].schedule.every"}, {400, "jobs[3].id"}, {201, ""}}
	if len(first) != len(want) {
		t.Fatalf("%d results, want %d", len(first), len(want))
	}
	for i, w := range want {
		r := first[i]
		if r.Status != w.status {
			t.Fatalf("result %d: status %d, want %d (%+v)", i, r.Status, w.status, r)
		}
		if w.status == 201 && (r.Job == nil || r.Job.ID == "" || r.Error != nil) {
			t.Fatalf("result %d: no created job: %+v", i, r)
		}
		if w.status != 201 && (r.Error == nil || r.Error.Field != w.field || r.Job != nil) {
			t.Fatalf("result %d: error %+v, want field %s", i, r.Error, w.field)
		}
		if w.status != 201 && !strings.HasPrefix(r.Error.Message, w.field+": ") {
			t.Fatalf("result %d: message %q does not start with its field %s", i, r.Error.Message, w.field)
		}
	}
	for _, i := range []int{0, 1, 4} {
		if g := e.do("GET", "/v1/jobs/"+first[i].Job.ID, nil); g.status != 200 {
			t.Fatalf("job %d (%s) not stored: %d", i, first[i].Job.ID, g.status)
		}
	}
	var list struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/jobs", nil).body, &list); err != nil || len(list.Jobs) != 3 {
		t.Fatalf("jobs stored: %d (%v), want 3", len(list.Jobs), err)
	}

	again := decodeBatch(t, e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{keyed("a"), keyed("c"), keyed("d")}})).Results
	if again[0].Status != 409 || again[0].Error.ID != first[0].Job.ID || again[1].Status != 409 || again[1].Error.ID != first[4].Job.ID {
		t.Fatalf("retried batch: %+v %+v, want 409 with ids %s, %s", again[0], again[1], first[0].Job.ID, first[4].Job.ID)
	}
	if again[2].Status != 201 {
		t.Fatalf("new job in the retried batch: %+v", again[2])
	}
}

// TestCreateJobsBatchRefusedWhole: a request that is not a batch is a 4xx
// naming what is wrong, and creates nothing.
func TestCreateJobsBatchRefusedWhole(t *testing.T) {
	e := newEnv(t)
	many := make([]any, 1001)
	for i := range many {
		many[i] = validJob(fmt.Sprintf("j%d", i))
	}
	tests := []struct {
		name   string
		body   any
		status int
		field  string
	}{
		{"no jobs", map[string]any{"jobs": []any{}}, 400, "jobs"},
		{"jobs missing", map[string]any{}, 400, "jobs"},
		{"over 1000 jobs", map[string]any{"jobs": many}, 400, "jobs"},
		{"unknown field", map[string]any{"jobs": []any{validJob("x")}, "dry_run": true}, 400, "body"},
		{"not an object", `[1,2]`, 400, "body"},
		{"trailing data", `{"jobs":[]} {}`, 400, "body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs:batch", tc.body)
			ae := r.apiErr(t)
			if r.status != tc.status || ae.Field != tc.field {
				t.Fatalf("got %d field %q, want %d %q: %s", r.status, ae.Field, tc.status, tc.field, r.body)
			}
		})
	}
	var list struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/jobs", nil).body, &list); err != nil || len(list.Jobs) != 0 {
		t.Fatalf("jobs stored: %d (%v), want 0", len(list.Jobs), err)
	}
}
