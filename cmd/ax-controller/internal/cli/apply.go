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
	var existing *protocol.Job
	if j.IdempotencyKey != "" {
		created, err := c.CreateJob(ctx, j)
		if err == nil {
			return applyResult{Action: "created", Source: fj.Source, Job: created}, nil
		}
		var ae *client.APIError
		if !errors.As(err, &ae) || !errors.Is(err, client.ErrExists) || ae.ID == "" {
			return applyResult{}, err
		}
		cur, err := c.GetJob(ctx, ae.ID)
		if err != nil {
			return applyResult{}, fmt.Errorf("get job %s holding idempotency_key %q: %w", ae.ID, j.IdempotencyKey, err)
		}
		existing = &cur
	} else {
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
			existing = &same[0]
		default:
			return applyResult{}, fmt.Errorf("name: %d jobs are named %q (%s, %s, ...); set idempotency_key or delete the extra jobs",
				len(same), j.Name, same[0].ID, same[1].ID)
		}
	}
	desired := j
	desired.ID = existing.ID
	if !fj.HasPaused {
		desired.Paused = existing.Paused
	}
	if desired.IdempotencyKey == "" {
		desired.IdempotencyKey = existing.IdempotencyKey
	}
	if sameSpec(*existing, desired) {
		return applyResult{Action: "unchanged", Source: fj.Source, Job: *existing}, nil
	}
	updated, err := c.UpdateJob(ctx, existing.ID, desired)
	if err != nil {
		return applyResult{}, err
	}
	return applyResult{Action: "updated", Source: fj.Source, Job: updated}, nil
}

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
