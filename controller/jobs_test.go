package controller

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

func validJob() protocol.Job {
	return protocol.Job{Name: "sync", Handler: "http", Payload: json.RawMessage(`{"url":"https://api.example.com/v1/sync"}`),
		Schedule: schedule.Spec{Every: "5m"}, Target: protocol.Target{Agent: "edge-7"}}
}

// TestCreateJobValidation feeds bad jobs to CreateJob (and bad JSON through
// protocol.DecodeJob as the API does): each error names its field, and
// nothing is left in ax_jobs or ax_idem.
func TestCreateJobValidation(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	mod := func(f func(j *protocol.Job)) protocol.Job {
		j := validJob()
		j.IdempotencyKey = "key-" + j.Name
		f(&j)
		return j
	}
	big := `"` + strings.Repeat("x", protocol.MaxPayloadSize) + `"`
	tests := []struct {
		name  string
		job   protocol.Job
		field string
		large bool
	}{
		{"id set", mod(func(j *protocol.Job) { j.ID = "ax-ctl-20261129120000-abcdef" }), "id", false},
		{"generation set", mod(func(j *protocol.Job) { j.Generation = 3 }), "generation", false},
		{"created_at set", mod(func(j *protocol.Job) { j.CreatedAt = time.Now() }), "created_at", false},
		{"no name", mod(func(j *protocol.Job) { j.Name = "" }), "name", false},
		{"control char in name", mod(func(j *protocol.Job) { j.Name = "a\nb" }), "name", false},
		{"long name", mod(func(j *protocol.Job) { j.Name = strings.Repeat("n", 129) }), "name", false},
		{"no handler", mod(func(j *protocol.Job) { j.Handler = "" }), "handler", false},
		{"bad handler", mod(func(j *protocol.Job) { j.Handler = "my handler" }), "handler", false},
		{"payload too large", mod(func(j *protocol.Job) { j.Payload = json.RawMessage(big) }), "payload", true},
		{"payload not json", mod(func(j *protocol.Job) { j.Payload = json.RawMessage(`{bad`) }), "payload", false},
		{"http payload without url", mod(func(j *protocol.Job) { j.Payload = json.RawMessage(`{"method":"POST"}`) }), "payload.url", false},
		{"http payload not http", mod(func(j *protocol.Job) { j.Payload = json.RawMessage(`{"url":"file:///etc/passwd"}`) }), "payload.url", false},
		{"http payload misspelt", mod(func(j *protocol.Job) { j.Payload = json.RawMessage(`{"url":"https://a.example/","header":{}}`) }), "payload", false},
		{"http without payload", mod(func(j *protocol.Job) { j.Payload = nil }), "payload", false},
		{"exec without command", mod(func(j *protocol.Job) { j.Handler, j.Payload = "exec", json.RawMessage(`{"args":["-a"]}`) }), "payload.command", false},
		{"exec relative command", mod(func(j *protocol.Job) { j.Handler, j.Payload = "exec", json.RawMessage(`{"command":"sync.sh"}`) }), "payload.command", false},
		{"exec AX_ env", mod(func(j *protocol.Job) {
			j.Handler, j.Payload = "exec", json.RawMessage(`{"command":"/bin/true","env":{"AX_EXEC_ID":"x"}}`)
		}), "payload.env", false},
		{"no schedule", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{} }), "schedule", false},
		{"two schedules", mod(func(j *protocol.Job) { j.Schedule.Asap = true }), "schedule", false},
		{"bad cron", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{Cron: "61 * * * *"} }), "schedule.cron", false},
		{"cron fields", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{Cron: "* *"} }), "schedule.cron", false},
		{"bad timezone", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{Cron: "0 2 * * *", Timezone: "Mars/Olympus"} }), "schedule.timezone", false},
		{"bad every", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{Every: "often"} }), "schedule.every", false},
		{"bad at", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{At: "tomorrow"} }), "schedule.at", false},
		{"negative delay", mod(func(j *protocol.Job) { j.Schedule = schedule.Spec{Delay: "-5s"} }), "schedule.delay", false},
		{"no target", mod(func(j *protocol.Job) { j.Target = protocol.Target{} }), "target", false},
		{"unsafe agent id", mod(func(j *protocol.Job) { j.Target.Agent = "edge.7>" }), "target.agent", false},
		{"agent and group", mod(func(j *protocol.Job) { j.Target.Group = "site=a" }), "target", false},
		{"bad group", mod(func(j *protocol.Job) { j.Target = protocol.Target{Group: "site"} }), "target.group", false},
		{"bad mode", mod(func(j *protocol.Job) { j.Target = protocol.Target{Group: "site=a", Mode: "some"} }), "target.mode", false},
		{"priority 10", mod(func(j *protocol.Job) { j.Priority = 10 }), "priority", false},
		{"negative priority", mod(func(j *protocol.Job) { j.Priority = -1 }), "priority", false},
		{"negative timeout", mod(func(j *protocol.Job) { j.Timeout = protocol.Duration(-time.Second) }), "timeout", false},
		{"max attempts", mod(func(j *protocol.Job) { j.Retry.MaxAttempts = 5000 }), "retry.max_attempts", false},
		{"retry max below base", mod(func(j *protocol.Job) {
			j.Retry = protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(time.Minute), Max: protocol.Duration(time.Second)}
		}), "retry.max", false},
		{"bad misfire", mod(func(j *protocol.Job) { j.Misfire.Policy = "sometimes" }), "misfire.policy", false},
		{"bad overlap", mod(func(j *protocol.Job) { j.Overlap = "maybe" }), "overlap", false},
		{"bad concurrency", mod(func(j *protocol.Job) { j.Concurrency = -2 }), "concurrency", false},
		{"bad precision", mod(func(j *protocol.Job) { j.Precision = "atomic" }), "precision", false},
		{"long idempotency key", mod(func(j *protocol.Job) { j.IdempotencyKey = strings.Repeat("k", 300) }), "idempotency_key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateJob(ctx, tt.job)
			var fe *protocol.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want *protocol.FieldError", err)
			}
			if fe.Field != tt.field {
				t.Fatalf("field = %q (%v), want %q", fe.Field, err, tt.field)
			}
			want := protocol.ErrInvalid
			if tt.large {
				want = protocol.ErrTooLarge
			}
			if !errors.Is(err, want) {
				t.Fatalf("%v does not wrap %v", err, want)
			}
		})
	}
	// Through the API decoder: unknown field, wrong type.
	for _, body := range []struct{ json, field string }{
		{`{"name":"x","handler":"http","schedule":{"asap":true},"target":{"agent":"a"},"priorty":3}`, "priorty"},
		{`{"name":"x","handler":"http","schedule":{"asap":true},"target":{"agent":"a"},"timeout":"soon"}`, "timeout"},
		{`{"name":"x","handler":"http","schedule":{"asap":true},"target":{"agent":"a"},"priority":"high"}`, "priority"},
	} {
		_, err := protocol.DecodeJob([]byte(body.json))
		var fe *protocol.FieldError
		if !errors.As(err, &fe) || fe.Field != body.field {
			t.Errorf("DecodeJob(%s) = %v, want field %s", body.json, err, body.field)
		}
	}
	for _, kv := range []jetstream.KeyValue{c.kv.Jobs, c.kv.Idem, c.kv.Execs} {
		if n := countKeys(t, kv); n != 0 {
			t.Errorf("bucket %s has %d keys after rejected creates", kv.Bucket(), n)
		}
	}
}

func countKeys(t *testing.T, kv jetstream.KeyValue) int {
	t.Helper()
	l, err := kv.ListKeys(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range l.Keys() {
		n++
	}
	return n
}

// TestIdempotencyConcurrent: 20 concurrent submits with one key make exactly
// one job; every caller learns its id.
func TestIdempotencyConcurrent(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	j := validJob()
	j.IdempotencyKey = "order-42-close"
	const n = 20
	ids := make([]string, n)
	errs := make([]error, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := c.CreateJob(ctx, j)
			var ee *ExistsError
			switch {
			case err == nil:
				ids[i], created[i] = got.ID, true
			case errors.As(err, &ee) && errors.Is(err, ErrExists):
				ids[i] = ee.ID
			default:
				errs[i] = err
			}
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if created[i] {
			winners++
		}
		if ids[i] != ids[0] {
			t.Fatalf("submit %d got id %s, submit 0 got %s", i, ids[i], ids[0])
		}
	}
	if winners != 1 {
		t.Fatalf("%d submits created a job, want 1", winners)
	}
	if k := countKeys(t, c.kv.Jobs); k != 1 {
		t.Fatalf("ax_jobs has %d keys, want 1", k)
	}
	jobs, _, err := c.ListJobs(ctx, JobFilter{})
	if err != nil || len(jobs) != 1 || jobs[0].ID != ids[0] {
		t.Fatalf("ListJobs = %v, %v", jobs, err)
	}
	// Deleting the job releases the key: a new submit makes a new job.
	if err := c.DeleteJob(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateJob(ctx, j)
	if err != nil || again.ID == ids[0] {
		t.Fatalf("create after delete = %v, %v", again.ID, err)
	}
}

// TestJobCRUD covers get, list with filters and pages, update, pause,
// resume and delete, and their errors.
func TestJobCRUD(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	var ids []string
	for i, agent := range []string{"a1", "a2", "a1"} {
		j := everyJob(agent, "1h")
		j.Name = "job" + string(rune('0'+i))
		got, err := c.CreateJob(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 1 || got.CreatedAt.IsZero() || protocol.ValidateJobID("id", got.ID) != nil ||
			!strings.HasPrefix(got.ID, "ax-ctl-") || got.Overlap != protocol.OverlapForbid {
			t.Fatalf("created job %+v lacks controller fields or defaults", got)
		}
		ids = append(ids, got.ID)
	}
	got, err := c.GetJob(ctx, ids[1])
	if err != nil || got.Target.Agent != "a2" {
		t.Fatalf("GetJob = %+v, %v", got, err)
	}
	if _, err := c.GetJob(ctx, "ax-ctl-20261129120000-zzzzzz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJob missing = %v", err)
	}
	if _, err := c.GetJob(ctx, "../etc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJob bad id = %v", err)
	}
	list, _, _ := c.ListJobs(ctx, JobFilter{Agent: "a1"})
	if len(list) != 2 {
		t.Fatalf("filter agent a1: %d jobs", len(list))
	}
	page1, next, err := c.ListJobs(ctx, JobFilter{Limit: 2})
	if err != nil || len(page1) != 2 || next == "" {
		t.Fatalf("page 1: %d jobs, next %q, %v", len(page1), next, err)
	}
	page2, next2, _ := c.ListJobs(ctx, JobFilter{Limit: 2, After: next})
	if len(page2) != 1 || next2 != "" || page2[0].ID == page1[1].ID {
		t.Fatalf("page 2: %v next %q", page2, next2)
	}
	if _, _, err := c.ListJobs(ctx, JobFilter{Limit: -1}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("bad limit: %v", err)
	}

	upd := got
	upd.Schedule = schedule.Spec{Every: "2h"}
	u, err := c.UpdateJob(ctx, ids[1], upd)
	if err != nil || u.Generation != 2 || u.Schedule.Every != "2h" || !u.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("UpdateJob = %+v, %v", u, err)
	}
	if _, err := c.UpdateJob(ctx, ids[1], upd); !errors.Is(err, ErrConflict) {
		t.Fatalf("update with stale generation = %v, want ErrConflict", err)
	}
	upd.Generation = 0
	upd.Priority = 12
	if _, err := c.UpdateJob(ctx, ids[1], upd); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("invalid update = %v", err)
	}
	upd.Priority = 0
	upd.IdempotencyKey = "new"
	var fe *protocol.FieldError
	if _, err := c.UpdateJob(ctx, ids[1], upd); !errors.As(err, &fe) || fe.Field != "idempotency_key" {
		t.Fatalf("idempotency key change = %v", err)
	}
	p, err := c.PauseJob(ctx, ids[1])
	if err != nil || !p.Paused || p.Generation != 3 {
		t.Fatalf("PauseJob = %+v, %v", p, err)
	}
	if p2, _ := c.PauseJob(ctx, ids[1]); p2.Generation != 3 {
		t.Fatalf("pausing twice bumped the generation to %d", p2.Generation)
	}
	paused := true
	if l, _, _ := c.ListJobs(ctx, JobFilter{Paused: &paused}); len(l) != 1 {
		t.Fatalf("paused filter: %d", len(l))
	}
	r, err := c.ResumeJob(ctx, ids[1])
	if err != nil || r.Paused || r.Generation != 4 {
		t.Fatalf("ResumeJob = %+v, %v", r, err)
	}
	if err := c.DeleteJob(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
	if _, err := c.UpdateJob(ctx, ids[1], upd); !errors.Is(err, ErrConflict) {
		t.Fatalf("update deleted = %v, want ErrConflict", err)
	}
	if err := c.DeleteJob(ctx, ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice = %v", err)
	}
	if l, _, _ := c.ListJobs(ctx, JobFilter{}); len(l) != 2 {
		t.Fatalf("after delete: %d jobs", len(l))
	}
}

// TestNotReady: the API refuses before Start and after Close.
func TestNotReady(t *testing.T) {
	c, err := New(testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateJob(ctx, validJob()); !errors.Is(err, ErrNotReady) {
		t.Fatalf("before start: %v", err)
	}
	if err := c.Ready(ctx); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready before start: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListAgents(ctx); !errors.Is(err, ErrNotReady) {
		t.Fatalf("after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
