package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// idemOrphanAfter is how old an idempotency entry whose job does not exist
// must be before CreateJob treats it as left over by a crash between the
// two writes of a create, and takes it over. Younger entries belong to a
// create still in flight. Compared with the KV server's timestamps, so on
// the wall clock.
const idemOrphanAfter = 30 * time.Second

// JobFilter selects jobs in ListJobs. Empty fields match everything.
type JobFilter struct {
	// Name matches the job name exactly.
	Name string
	// Handler matches the handler name exactly.
	Handler string
	// Agent matches pinned jobs of this agent.
	Agent string
	// Group matches group jobs with this selector (canonical form compared).
	Group string
	// Paused, when set, matches jobs whose Paused equals it.
	Paused *bool
	// Retired lists the one-shot jobs retired from the live job set (all
	// their executions ended and left live state, controller/retention), from the
	// history index, instead of the live jobs.
	Retired bool
	// Limit bounds the page size (default 100, at most 1000).
	Limit int
	// After is the last id of the previous page; jobs are ordered by id.
	After string
}

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func pageSize(n int) (int, error) {
	switch {
	case n == 0:
		return defaultPageSize, nil
	case n < 0 || n > maxPageSize:
		return 0, invalidField("limit", "must be between 1 and %d, got %d", maxPageSize, n)
	}
	return n, nil
}

// now returns the controller's clock in UTC without a monotonic reading.
func (c *core) now() time.Time { return c.clk.Now().UTC().Round(0) }

// mono is the time lease durations are measured with: "seen at", "renewed
// at" and the comparisons with them. It keeps Go's monotonic clock reading
// (clock.Real), so a step of the wall clock (NTP, a VM resumed) neither
// moves a live lease nor keeps a dead one. Values written to KV use now.
func (c *core) mono() time.Time {
	if c.cfg.monoNow != nil {
		return c.cfg.monoNow()
	}
	return c.clk.Now()
}

// CreateJob validates j, stores it with a new id and generation 1, claims
// its idempotency key, and dispatches it: periodic jobs are assigned to
// their agents, one-shot jobs (asap, at, delay) get a PENDING execution and
// a run command. A taken idempotency key returns *ExistsError with the
// existing job's id. A validation error (*protocol.FieldError) writes nothing.
func (c *Controller) CreateJob(ctx context.Context, j protocol.Job) (protocol.Job, error) {
	if err := c.ready(); err != nil {
		return protocol.Job{}, err
	}
	if err := validateNew(j); err != nil {
		return protocol.Job{}, err
	}
	// One write op from before created_at to the job's executions: a
	// one-shot job of generation 1 created before every write mark has
	// them (createMissingOneShots).
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		return protocol.Job{}, fmt.Errorf("create job: %w: %w", ErrNotReady, err)
	}
	now := c.now()
	j = j.WithDefaults()
	j.CreatedAt = now
	j.Generation = 1
	for try := 1; ; try++ {
		j.ID = protocol.NewJobID(c.cfg.Node, now, c.idRand())
		out, err := c.jobsvc.createJobAs(ctx, j)
		if errors.Is(err, errJobIDTaken) && try < jobIDTries {
			continue
		}
		return out, err
	}
}

// jobIDTries bounds how often CreateJob draws a new id after the one it
// drew was taken. A job id has about 31 random bits per node and second
// (protocol.NewJobID), so at 10,000 creates a second two of them draw the
// same id about once every 40 s; a second draw taken too is about one in
// 200,000 of those.
const jobIDTries = 4

// createJobAs is one try of CreateJob with the id j carries. It returns an
// error wrapping errJobIDTaken and jetstream.ErrKeyExists, having written
// nothing that stays, when that id is taken.
func (c *jobService) createJobAs(ctx context.Context, j protocol.Job) (protocol.Job, error) {
	data, err := j.AppendJSON(make([]byte, 0, 256+len(j.Payload))) // json.Marshal's bytes, by hand
	if err != nil {
		return protocol.Job{}, fmt.Errorf("create job: encode: %w", err)
	}
	if len(data) > protocol.MaxMessageSize {
		return protocol.Job{}, &protocol.FieldError{Field: "", Reason: fmt.Sprintf("job is %d bytes encoded, at most %d allowed", len(data), protocol.MaxMessageSize), Err: protocol.ErrTooLarge}
	}
	var idemRev uint64
	if j.IdempotencyKey != "" {
		idemRev, err = c.claimIdem(ctx, j.IdempotencyKey, j.ID)
		if err != nil {
			return protocol.Job{}, err
		}
	}
	release := func() {
		if idemRev != 0 {
			_ = c.kv.Idem.Delete(context.WithoutCancel(ctx), streams.IdemKey(j.IdempotencyKey), jetstream.LastRevision(idemRev))
		}
	}
	if out, ok, err := c.createOneShot(ctx, j, data); ok {
		if err != nil {
			release()
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			err = fmt.Errorf("%w (%w)", err, errJobIDTaken)
		}
		return out, err
	}
	rev, err := c.kv.Jobs.Create(ctx, j.ID, data)
	if err != nil {
		release()
		if errors.Is(err, jetstream.ErrKeyExists) {
			return protocol.Job{}, fmt.Errorf("create job: store: %w (%w)", err, errJobIDTaken)
		}
		return protocol.Job{}, fmt.Errorf("create job: store: %w", err)
	}
	c.jobs.Put(j, rev)
	c.log.Debug("job created", "job", j.ID, "name", j.Name, "handler", j.Handler, "schedule", j.Schedule.Kind(), "generation", j.Generation)
	c.onJobChanged(ctx, nil, &j, rev)
	return j, nil
}

// claimIdem makes the idempotency key point at jobID (KV Create is the
// unique constraint) and returns the entry's revision; a taken key is
// *ExistsError.
func (c *jobService) claimIdem(ctx context.Context, key, jobID string) (uint64, error) {
	k := streams.IdemKey(key)
	for range 5 {
		rev, err := c.kv.Idem.Create(ctx, k, []byte(jobID))
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("create job: claim idempotency key: %w", err)
		}
		e, err := c.kv.Idem.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile: try again
		}
		if err != nil {
			return 0, fmt.Errorf("create job: read idempotency key: %w", err)
		}
		existing := string(e.Value())
		if !c.jobs.Has(existing) {
			if _, gerr := c.kv.Jobs.Get(ctx, existing); errors.Is(gerr, jetstream.ErrKeyNotFound) && time.Since(e.Created()) > idemOrphanAfter {
				c.log.Warn("taking over orphaned idempotency key", "job", existing)
				_ = c.kv.Idem.Delete(ctx, k, jetstream.LastRevision(e.Revision()))
				continue
			}
		}
		return 0, &ExistsError{ID: existing}
	}
	return 0, fmt.Errorf("create job: claim idempotency key: %w: too much contention", ErrConflict)
}

// GetJob returns a job by id.
func (c *Controller) GetJob(ctx context.Context, id string) (protocol.Job, error) {
	if err := c.ready(); err != nil {
		return protocol.Job{}, err
	}
	if err := protocol.ValidateJobID("id", id); err != nil {
		return protocol.Job{}, fmt.Errorf("get job %q: %w", id, ErrNotFound)
	}
	j, _, err := c.jobsvc.readJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// A one-shot job whose executions all ended left the live job set
		// (controller/retention); say so rather than that it never was.
		c.hist.catchUp(ctx)
		if at, ok, herr := c.hist.idx.RetiredAt(ctx, id); herr == nil && ok {
			return protocol.Job{}, fmt.Errorf("get job %s: %w: %w at %s, after its executions had all ended; "+
				"GET /v1/jobs?state=retired lists it and GET /v1/executions?job=%s its executions", id, ErrNotFound, ErrJobRetired, at.Format(time.RFC3339), id)
		}
	}
	return j, err
}

func (c *jobService) readJob(ctx context.Context, id string) (protocol.Job, uint64, error) {
	e, err := c.kv.Jobs.Get(ctx, id)
	if err != nil {
		return protocol.Job{}, 0, kvErr("get job "+id, err)
	}
	var j protocol.Job
	if err := storedjson.Unmarshal(e.Value(), &j); err != nil {
		return protocol.Job{}, 0, fmt.Errorf("get job %s: decode: %w", id, err)
	}
	c.jobs.Put(j, e.Revision())
	return j, e.Revision(), nil
}

// jobDeleted reports whether the latest revision of id is a delete marker.
func (c *jobService) jobDeleted(ctx context.Context, id string) bool {
	h, err := c.kv.Jobs.History(ctx, id)
	if err != nil || len(h) == 0 {
		return false
	}
	return h[len(h)-1].Operation() != jetstream.KeyValuePut
}

// ListJobs returns one page of jobs matching f, ordered by id, and the
// cursor of the next page ("" on the last page).
func (c *Controller) ListJobs(ctx context.Context, f JobFilter) ([]protocol.Job, string, error) {
	if err := c.ready(); err != nil {
		return nil, "", err
	}
	limit, err := pageSize(f.Limit)
	if err != nil {
		return nil, "", err
	}
	group := ""
	if f.Group != "" {
		sel, err := protocol.ParseSelector("group", f.Group)
		if err != nil {
			return nil, "", err
		}
		group = sel.String()
	}
	match := func(j protocol.Job) bool {
		if f.Name != "" && j.Name != f.Name || f.Handler != "" && j.Handler != f.Handler ||
			f.Agent != "" && j.Target.Agent != f.Agent || f.Paused != nil && j.Paused != *f.Paused {
			return false
		}
		if group != "" {
			sel, err := protocol.ParseSelector("group", j.Target.Group)
			if err != nil || j.Target.Group == "" || sel.String() != group {
				return false
			}
		}
		return true
	}
	if f.Retired {
		c.hist.catchUp(ctx)
		out, err := c.hist.idx.RetiredJobs(ctx, f.After, limit+1, match)
		if err != nil {
			return nil, "", err
		}
		if len(out) > limit {
			return out[:limit], out[limit-1].ID, nil
		}
		return out, "", nil
	}
	out := c.jobs.Page(f.After, limit+1, func(j *protocol.Job) bool { return match(*j) })
	if len(out) > limit {
		return out[:limit], out[limit-1].ID, nil
	}
	return out, "", nil
}

// UpdateJob replaces the spec of job id with j (id in j must be empty or
// equal). The generation goes up by one and the agents get the new spec;
// created_at and the idempotency key cannot change. A non-zero j.Generation
// must equal the current one (optimistic concurrency), else ErrConflict.
func (c *Controller) UpdateJob(ctx context.Context, id string, j protocol.Job) (protocol.Job, error) {
	if err := c.ready(); err != nil {
		return protocol.Job{}, err
	}
	if j.ID != "" && j.ID != id {
		return protocol.Job{}, invalidField("id", "%q does not match the job being updated (%s)", j.ID, id)
	}
	if err := protocol.ValidateJobID("id", id); err != nil {
		return protocol.Job{}, fmt.Errorf("update job %q: %w", id, ErrNotFound)
	}
	spec := j
	spec.ID, spec.Generation, spec.CreatedAt = "", 0, time.Time{}
	if err := validateSpec(spec); err != nil {
		return protocol.Job{}, err
	}
	return c.jobsvc.mutateJob(ctx, id, func(cur protocol.Job) (protocol.Job, bool, error) {
		if j.Generation != 0 && j.Generation != cur.Generation {
			return cur, false, fmt.Errorf("update job %s: %w: generation %d is not the current %d (updated meanwhile)", id, ErrConflict, j.Generation, cur.Generation)
		}
		if spec.IdempotencyKey != cur.IdempotencyKey {
			return cur, false, invalidField("idempotency_key", "cannot be changed by an update")
		}
		next := spec.WithDefaults()
		next.ID, next.CreatedAt = cur.ID, cur.CreatedAt
		return next, true, nil
	})
}

// PauseJob stops a job from firing (an update with paused=true).
func (c *Controller) PauseJob(ctx context.Context, id string) (protocol.Job, error) {
	return c.jobsvc.setPaused(ctx, id, true)
}

// ResumeJob lets a paused job fire again (an update with paused=false).
func (c *Controller) ResumeJob(ctx context.Context, id string) (protocol.Job, error) {
	return c.jobsvc.setPaused(ctx, id, false)
}

func (c *jobService) setPaused(ctx context.Context, id string, paused bool) (protocol.Job, error) {
	if err := c.ready(); err != nil {
		return protocol.Job{}, err
	}
	if err := protocol.ValidateJobID("id", id); err != nil {
		return protocol.Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return c.mutateJob(ctx, id, func(cur protocol.Job) (protocol.Job, bool, error) {
		if cur.Paused == paused {
			return cur, false, nil
		}
		cur.Paused = paused
		return cur, true, nil
	})
}

// mutateJob applies fn to the current job with compare-and-set, bumping the
// generation when fn reports a change, and dispatches the change, in one
// write op (a reload after a crash re-sends the assignments of the jobs
// changed after the write marks: reassignChanged).
func (c *jobService) mutateJob(ctx context.Context, id string, fn func(cur protocol.Job) (protocol.Job, bool, error)) (protocol.Job, error) {
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		return protocol.Job{}, fmt.Errorf("update job %s: %w: %w", id, ErrNotReady, err)
	}
	for range 10 {
		cur, rev, err := c.readJob(ctx, id)
		if errors.Is(err, ErrNotFound) {
			if c.jobDeleted(ctx, id) {
				return protocol.Job{}, fmt.Errorf("job %s: %w: it was deleted", id, ErrConflict)
			}
			return protocol.Job{}, err
		}
		if err != nil {
			return protocol.Job{}, err
		}
		next, changed, err := fn(cur)
		if err != nil || !changed {
			return next, err
		}
		if x, ok := oneShotExecID(cur); ok {
			// A record its create holds (createheld.go) is stored before
			// the change: its run is out, and after a crash its report
			// must find the execution whatever the job became (paused,
			// another schedule).
			c.ex.storeHeldRecord(ctx, x)
		}
		next.Generation = cur.Generation + 1
		data, err := next.AppendJSON(make([]byte, 0, 256+len(next.Payload)))
		if err != nil {
			return protocol.Job{}, fmt.Errorf("update job %s: encode: %w", id, err)
		}
		nrev, err := c.kv.Jobs.Update(ctx, id, data, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return protocol.Job{}, fmt.Errorf("update job %s: %w", id, err)
		}
		c.jobs.Put(next, nrev)
		c.log.Info("job updated", "job", id, "generation", next.Generation, "paused", next.Paused)
		c.onJobChanged(ctx, &cur, &next, nrev)
		return next, nil
	}
	return protocol.Job{}, fmt.Errorf("update job %s: %w: too much contention", id, ErrConflict)
}

// DeleteJob removes a job: its agents get unassign commands, its
// idempotency key is released. Executions already created run to their end.
func (c *Controller) DeleteJob(ctx context.Context, id string) error {
	if err := c.ready(); err != nil {
		return err
	}
	if err := protocol.ValidateJobID("id", id); err != nil {
		return fmt.Errorf("delete job %q: %w", id, ErrNotFound)
	}
	// One write op with the unassigns and the cancels it sends.
	ctx, op := c.marks.Begin(ctx)
	defer op.End()
	if err := op.Refused(); err != nil {
		return fmt.Errorf("delete job %s: %w: %w", id, ErrNotReady, err)
	}
	for range 10 {
		cur, rev, err := c.jobsvc.readJob(ctx, id)
		if err != nil {
			return err
		}
		if x, ok := oneShotExecID(cur); ok {
			// A record its create holds (createheld.go) is stored before
			// the job goes: a deleted job's run goes on to its end, and
			// after a crash its report must find the execution.
			c.ex.storeHeldRecord(ctx, x)
		}
		err = c.kv.Jobs.Delete(ctx, id, jetstream.LastRevision(rev))
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete job %s: %w", id, err)
		}
		c.jobs.Remove(id, rev+1)
		if cur.IdempotencyKey != "" {
			k := streams.IdemKey(cur.IdempotencyKey)
			if e, err := c.kv.Idem.Get(ctx, k); err == nil && string(e.Value()) == id {
				if err := c.ret.ReleaseIdem(ctx, k, e.Revision()); err != nil {
					c.log.Warn("release idempotency key", "job", id, "err", err)
				}
			}
		}
		c.log.Info("job deleted", "job", id)
		c.jobsvc.onJobChanged(ctx, &cur, nil, rev+1)
		return nil
	}
	return fmt.Errorf("delete job %s: %w: too much contention", id, ErrConflict)
}
