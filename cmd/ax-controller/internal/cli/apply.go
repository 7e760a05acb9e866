package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

// applyOne creates fj.Job or updates the job it matches: by
// idempotency_key when set, else by name. An existing job whose spec
// already equals the file's is left alone ("unchanged").
func applyOne(ctx context.Context, c *client.Client, fj FileJob) (applyResult, error) {
	j := fj.Job
	if j.IdempotencyKey != "" {
		created, err := c.CreateJob(ctx, j)
		if err == nil {
			return applyResult{Action: "created", Source: fj.Source, Job: created}, nil
		}
		var ae *client.APIError
		if !errors.As(err, &ae) || !errors.Is(err, client.ErrExists) || ae.ID == "" {
			return applyResult{}, err
		}
		return applyKeyed(ctx, c, fj, ae.ID)
	}
	matches, err := c.AllJobs(ctx, client.JobFilter{Name: j.Name}, 0)
	if err != nil {
		return applyResult{}, fmt.Errorf("look up jobs named %q: %w", j.Name, err)
	}
	var same []protocol.Job
	for _, m := range matches {
		if m.Name == j.Name {
			same = append(same, m)
		}
	}
	switch len(same) {
	case 0:
		created, err := c.CreateJob(ctx, j)
		if err != nil {
			return applyResult{}, err
		}
		return applyResult{Action: "created", Source: fj.Source, Job: created}, nil
	case 1:
		return applyExisting(ctx, c, fj, same[0])
	default:
		return applyResult{}, fmt.Errorf("name: %d jobs are named %q (%s, %s, ...); set idempotency_key or delete the extra jobs",
			len(same), j.Name, same[0].ID, same[1].ID)
	}
}

// applyExisting updates existing to fj's spec, or leaves it alone when the
// spec is the same ("unchanged").
func applyExisting(ctx context.Context, c *client.Client, fj FileJob, existing protocol.Job) (applyResult, error) {
	j := fj.Job
	desired := j
	desired.ID = existing.ID
	if !fj.HasPaused {
		desired.Paused = existing.Paused
	}
	if desired.IdempotencyKey == "" {
		desired.IdempotencyKey = existing.IdempotencyKey
	}
	if sameSpec(existing, desired) {
		return applyResult{Action: "unchanged", Source: fj.Source, Job: existing}, nil
	}
	updated, err := c.UpdateJob(ctx, existing.ID, desired)
	if err != nil {
		return applyResult{}, err
	}
	return applyResult{Action: "updated", Source: fj.Source, Job: updated}, nil
}

// applyKeyed applies fj to the job ae.ID that holds fj's idempotency key.
func applyKeyed(ctx context.Context, c *client.Client, fj FileJob, id string) (applyResult, error) {
	cur, err := c.GetJob(ctx, id)
	if err != nil {
		return applyResult{}, fmt.Errorf("get job %s holding idempotency_key %q: %w", id, fj.Job.IdempotencyKey, err)
	}
	return applyExisting(ctx, c, fj, cur)
}

// applyAll applies jobs in order and returns one result per job applied.
// Jobs with an idempotency_key are created in batches (POST
// /v1/jobs:batch, up to maxApplyBatch a request); those whose key is taken
// are then compared and updated one by one, as are jobs matched by name.
// On an error it returns the results of the jobs applied so far (in file
// order, the failed one left out) and the first error, naming its source.
func applyAll(ctx context.Context, c *client.Client, jobs []FileJob) ([]applyResult, error) {
	res := make([]*applyResult, len(jobs))
	errs := make([]error, len(jobs))
	var keyed []int
	for i, fj := range jobs {
		if fj.Job.IdempotencyKey != "" {
			keyed = append(keyed, i)
		}
	}
	for start := 0; start < len(keyed); start += maxApplyBatch {
		chunk := keyed[start:min(start+maxApplyBatch, len(keyed))]
		batch := make([]protocol.Job, len(chunk))
		for k, i := range chunk {
			batch[k] = jobs[i].Job
		}
		out, err := c.CreateJobs(ctx, batch)
		if err != nil {
			errs[chunk[0]] = err
			break
		}
		for k, i := range chunk {
			r := out[k]
			var ae *client.APIError
			switch {
			case r.Err == nil:
				res[i] = &applyResult{Action: "created", Source: jobs[i].Source, Job: r.Job}
			case errors.Is(r.Err, client.ErrExists) && errors.As(r.Err, &ae) && ae.ID != "":
				ar, err := applyKeyed(ctx, c, jobs[i], ae.ID)
				if err != nil {
					errs[i] = err
					continue
				}
				res[i] = &ar
			default:
				errs[i] = r.Err
			}
		}
	}
	var done []applyResult
	var first error
	for i, fj := range jobs {
		if first == nil && errs[i] == nil && res[i] == nil && fj.Job.IdempotencyKey == "" {
			r, err := applyOne(ctx, c, fj)
			if err != nil {
				errs[i] = err
			} else {
				res[i] = &r
			}
		}
		if errs[i] != nil && first == nil {
			first = fmt.Errorf("%s: %w", fj.Source, errs[i])
		}
		if res[i] != nil {
			done = append(done, *res[i])
		}
	}
	return done, first
}

// maxApplyBatch is the most jobs apply sends in one batch request (the
// API's limit).
const maxApplyBatch = 1000

// sameSpec compares the user-written parts of two jobs, defaults applied.
func sameSpec(a, b protocol.Job) bool {
	norm := func(j protocol.Job) []byte {
		j = j.WithDefaults()
		j.ID, j.Generation, j.CreatedAt = "", 0, time.Time{}
		if len(j.Payload) > 0 {
			// Re-marshal: sorted keys, no white space.
			var v any
			if json.Unmarshal(j.Payload, &v) == nil {
				j.Payload, _ = json.Marshal(v)
			}
		}
		out, _ := json.Marshal(j)
		return out
	}
	return bytes.Equal(norm(a), norm(b))
}
