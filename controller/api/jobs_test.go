package api_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

func TestJobLifecycle(t *testing.T) {
	e := newEnv(t)

	r := e.do("POST", "/v1/jobs", validJob("valve"))
	if r.status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", r.status, r.body)
	}
	job := decode[protocol.Job](t, r)
	if err := protocol.ValidateJobID("id", job.ID); err != nil {
		t.Fatalf("created id: %v", err)
	}
	if loc := r.header.Get("Location"); loc != "/v1/jobs/"+job.ID {
		t.Errorf("Location = %q", loc)
	}

	r = e.do("GET", "/v1/jobs/"+job.ID, nil)
	if got := decode[protocol.Job](t, r); r.status != 200 || got.ID != job.ID || got.Name != "valve" {
		t.Fatalf("get: %d %s", r.status, r.body)
	}

	r = e.do("GET", "/v1/jobs?name=valve", nil)
	list := decode[apiv1.JobList](t, r)
	if r.status != 200 || len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID || list.Next != "" {
		t.Fatalf("list by name: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs?name=other", nil)
	if list := decode[apiv1.JobList](t, r); len(list.Jobs) != 0 || string(r.body) == "" || !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Fatalf("list other: %s", r.body)
	}

	upd := validJob("valve")
	upd["priority"] = 7
	r = e.do("PUT", "/v1/jobs/"+job.ID, upd)
	if got := decode[protocol.Job](t, r); r.status != 200 || got.Priority != 7 || got.Generation != job.Generation+1 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}

	r = e.do("POST", "/v1/jobs/"+job.ID+":pause", nil)
	if got := decode[protocol.Job](t, r); r.status != 200 || !got.Paused {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs?paused=true", nil)
	if list := decode[apiv1.JobList](t, r); len(list.Jobs) != 1 {
		t.Fatalf("paused filter: %s", r.body)
	}
	r = e.do("POST", "/v1/jobs/"+job.ID+":resume", nil)
	if got := decode[protocol.Job](t, r); r.status != 200 || got.Paused {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}

	r = e.do("POST", "/v1/jobs/"+job.ID+":trigger", nil)
	ex := decode[protocol.Execution](t, r)
	if r.status != 200 || ex.JobID != job.ID || ex.ExecID == "" {
		t.Fatalf("trigger: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/executions/"+ex.ExecID, nil)
	if got := decode[protocol.Execution](t, r); r.status != 200 || got.ExecID != ex.ExecID {
		t.Fatalf("get exec: %d %s", r.status, r.body)
	}
	// A list waits at most 2 s (production's bound) for the history index
	// to hold the trigger's event; a loaded -race run can take longer.
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "list execs: " + string(r.body) }, func() bool {
		r = e.do("GET", "/v1/executions?job="+job.ID, nil)
		el := decode[apiv1.ExecutionList](t, r)
		return r.status == 200 && len(el.Executions) == 1 && el.Executions[0].ExecID == ex.ExecID
	})
	// from/to bound the scheduled time: [from, to).
	at := ex.ScheduledAt.UTC()
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"from=" + at.Format(time.RFC3339Nano), 1},
		{"to=" + at.Format(time.RFC3339Nano), 0},
		{"from=" + at.Add(-time.Minute).Format(time.RFC3339) + "&to=" + at.Add(time.Minute).Format(time.RFC3339), 1},
		{"from=" + at.Add(time.Millisecond).Format(time.RFC3339Nano), 0},
	} {
		r = e.do("GET", "/v1/executions?job="+job.ID+"&"+tc.q, nil)
		if el := decode[apiv1.ExecutionList](t, r); r.status != 200 || len(el.Executions) != tc.want {
			t.Fatalf("list execs %s: %d %s, want %d", tc.q, r.status, r.body, tc.want)
		}
	}
	r = e.do("POST", "/v1/executions/"+ex.ExecID+":cancel", nil)
	if got := decode[protocol.Execution](t, r); r.status != 200 || got.State != protocol.StateCancelled {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return "state filter (lower case): " + string(r.body) }, func() bool {
		r = e.do("GET", "/v1/executions?state=cancelled", nil)
		return len(decode[apiv1.ExecutionList](t, r).Executions) == 1
	})
	// A cancelled execution cannot be cancelled again: a conflict.
	r = e.do("POST", "/v1/executions/"+ex.ExecID+":cancel", nil)
	if ae := r.apiErr(t); r.status != http.StatusConflict || ae.Code != apiv1.CodeConflict {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}

	r = e.do("GET", "/v1/agents", nil)
	if al := decode[apiv1.AgentPage](t, r); r.status != 200 || al.Agents == nil || len(al.Agents) != 0 {
		t.Fatalf("agents: %d %s", r.status, r.body)
	}

	r = e.do("DELETE", "/v1/jobs/"+job.ID, nil)
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs/"+job.ID, nil)
	if ae := r.apiErr(t); r.status != 404 || ae.Code != apiv1.CodeNotFound {
		t.Fatalf("get deleted: %d %s", r.status, r.body)
	}
	r = e.do("DELETE", "/v1/jobs/"+job.ID, nil)
	if r.status != 404 {
		t.Fatalf("delete twice: %d %s", r.status, r.body)
	}
}

func TestCreateIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	j := validJob("order close")
	j["idempotency_key"] = "order-42"
	r := e.do("POST", "/v1/jobs", j)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	first := decode[protocol.Job](t, r)
	r = e.do("POST", "/v1/jobs", j)
	ae := r.apiErr(t)
	if r.status != http.StatusConflict || ae.Code != apiv1.CodeExists || ae.ID != first.ID || ae.Field != "idempotency_key" {
		t.Fatalf("second create: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs", nil)
	if l := decode[apiv1.JobList](t, r); len(l.Jobs) != 1 {
		t.Fatalf("want one job, got %s", r.body)
	}
}

func TestListPaging(t *testing.T) {
	e := newEnv(t)
	ids := map[string]bool{}
	for i := range 5 {
		r := e.do("POST", "/v1/jobs", validJob("job-"+string(rune('a'+i))))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		ids[decode[protocol.Job](t, r).ID] = true
	}
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		r := e.do("GET", "/v1/jobs?limit=2&after="+after, nil)
		l := decode[apiv1.JobList](t, r)
		if r.status != 200 || len(l.Jobs) > 2 {
			t.Fatalf("page: %d %s", r.status, r.body)
		}
		for _, j := range l.Jobs {
			if seen[j.ID] {
				t.Fatalf("job %s on two pages", j.ID)
			}
			seen[j.ID] = true
		}
		pages++
		if l.Next == "" {
			break
		}
		after = l.Next
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if !maps.Equal(seen, ids) || pages != 3 {
		t.Fatalf("paging saw %d jobs in %d pages, want 5 in 3", len(seen), pages)
	}
}

// TestUpdateInvalidKeepsJob: a rejected update changes nothing.
func TestUpdateInvalidKeepsJob(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/jobs", validJob("keep"))
	job := decode[protocol.Job](t, r)
	bad := validJob("keep")
	bad["schedule"] = map[string]any{"cron": "99 * * * *"}
	r = e.do("PUT", "/v1/jobs/"+job.ID, bad)
	if ae := r.apiErr(t); r.status != 400 || ae.Field != "schedule.cron" {
		t.Fatalf("bad update: %d %s", r.status, r.body)
	}
	other := validJob("keep")
	other["id"] = "ax-t1-20260101000000-aaaaaa"
	r = e.do("PUT", "/v1/jobs/"+job.ID, other)
	if ae := r.apiErr(t); r.status != 400 || ae.Field != "id" {
		t.Fatalf("update with other id: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs/"+job.ID, nil)
	if got := decode[protocol.Job](t, r); got.Generation != job.Generation || got.Schedule.Every != "1h" {
		t.Fatalf("job changed by rejected updates: %s", r.body)
	}
}
