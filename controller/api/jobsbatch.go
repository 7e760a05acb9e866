package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// createJobs serves POST /v1/jobs:batch. The request is refused whole
// (4xx) only when it is not a batch: not JSON, unknown fields, no jobs or
// too many, too large. Otherwise the answer is 200 with one result per
// job; a job that does not decode or validate gets its own 400 and the
// others are created.
func (s *server) createJobs(w http.ResponseWriter, r *http.Request) {
	noteAudit(r, "job.create_batch", "", "")
	body, err := readBodyMax(w, r, apiv1.MaxBatchBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b apiv1.JobBatch
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		s.fail(w, r, invalidf("body", "not a job batch ({\"jobs\": [...]}): %v", err))
		return
	}
	if dec.More() {
		s.fail(w, r, invalidf("body", "data after the batch object"))
		return
	}
	if n := len(b.Jobs); n == 0 || n > apiv1.MaxBatchJobs {
		s.fail(w, r, invalidf("jobs", "must hold 1 to %d jobs, got %d", apiv1.MaxBatchJobs, n))
		return
	}
	items := make([]apiv1.JobBatchItem, len(b.Jobs))
	var valid []protocol.Job
	var at []int
	var created []string
	for i, raw := range b.Jobs {
		j, err := s.decode.Job(raw)
		if err == nil && j.ID != "" {
			err = invalidf("id", "is made by the controller; leave it out of a create request")
		}
		if err != nil {
			items[i] = s.batchError(i, err)
			continue
		}
		valid = append(valid, j)
		at = append(at, i)
	}
	if len(valid) > 0 {
		res, err := s.b.CreateJobs(r.Context(), valid)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for k, jr := range res {
			i := at[k]
			if jr.Err != nil {
				items[i] = s.batchError(i, jr.Err)
				continue
			}
			items[i] = apiv1.JobBatchItem{Status: http.StatusCreated, Job: &jr.Job}
			created = append(created, jr.Job.ID)
		}
	}
	if rec := auditFrom(r.Context()); rec != nil {
		rec.jobs = created
	}
	writeJSON(w, http.StatusOK, apiv1.JobBatchResult{Results: items})
}

// batchError is job i's error as a batch item: classified as POST
// /v1/jobs would, its field prefixed with jobs[i]; an internal error's
// detail is logged, not shown.
func (s *server) batchError(i int, err error) apiv1.JobBatchItem {
	status, body, ok := classify(err)
	if !ok {
		s.log.Error("api internal error in a job batch", "index", i, "err", err)
	}
	prefix := fmt.Sprintf("jobs[%d]", i)
	field := body.Field
	var ee *controller.ExistsError
	switch {
	case field != "" && !errors.As(err, &ee):
		body.Field = prefix + "." + field
	case field == "":
		body.Field = prefix
	}
	switch {
	case body.Message == "":
	case field != "" && strings.HasPrefix(body.Message, field+":"):
		// "schedule.every: ..." reads "jobs[2].schedule.every: ...",
		// as the field does, so that a client prints it once.
		body.Message = prefix + "." + body.Message
	default:
		body.Message = prefix + ": " + body.Message
	}
	return apiv1.JobBatchItem{Status: status, Error: &body}
}
