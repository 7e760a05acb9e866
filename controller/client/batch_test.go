package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

// TestCreateJobsBatch: CreateJobs gives one result per job, in order: the
// created job, a typed *APIError naming jobs[i].field for an invalid job,
// and ErrExists with the existing id for a taken idempotency key; a batch
// over 1000 jobs is one error and creates nothing.
func TestCreateJobsBatch(t *testing.T) {
	srv, _ := serve(t)
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	keyed := job("keyed")
	keyed.IdempotencyKey = "k1"
	bad := job("bad")
	bad.Schedule.Every = "banana"
	res, err := c.CreateJobs(ctx, []protocol.Job{job("a"), bad, keyed})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Job.ID == "" || res[2].Err != nil {
		t.Fatalf("created: %+v %+v", res[0], res[2])
	}
	var ae *client.APIError
	if !errors.As(res[1].Err, &ae) || ae.Field != "jobs[1].schedule.every" || ae.Status != 400 {
		t.Fatalf("invalid job: %v, want a 400 on jobs[1].schedule.every", res[1].Err)
	}
	again, err := c.CreateJobs(ctx, []protocol.Job{keyed})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(again[0].Err, client.ErrExists) || !errors.As(again[0].Err, &ae) || ae.ID != res[2].Job.ID {
		t.Fatalf("repeated key: %v, want ErrExists with id %s", again[0].Err, res[2].Job.ID)
	}
	many := make([]protocol.Job, 1001)
	for i := range many {
		many[i] = job("m")
	}
	if _, err := c.CreateJobs(ctx, many); !errors.As(err, &ae) || ae.Field != "jobs" {
		t.Fatalf("1001 jobs: %v, want an error on jobs", err)
	}
	all, err := c.AllJobs(ctx, client.JobFilter{}, 0)
	if err != nil || len(all) != 2 {
		t.Fatalf("jobs stored: %d %v, want 2", len(all), err)
	}
}
