package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

func (s *server) createJob(w http.ResponseWriter, r *http.Request) {
	noteAudit(r, "job.create", "", "")
	j, err := s.decodeJob(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if j.ID != "" {
		s.fail(w, r, invalidf("id", "is made by the controller; leave it out of a create request"))
		return
	}
	created, err := s.b.CreateJob(r.Context(), j)
	if err != nil {
		var ee *controller.ExistsError
		if errors.As(err, &ee) {
			noteAudit(r, "job.create", ee.ID, "")
		}
		s.fail(w, r, err)
		return
	}
	noteAudit(r, "job.create", created.ID, "")
	w.Header().Set("Location", "/v1/jobs/"+created.ID)
	writeJSON(w, http.StatusCreated, created)
}

func (s *server) decodeJob(w http.ResponseWriter, r *http.Request) (protocol.Job, error) {
	body, err := readBody(w, r)
	if err != nil {
		return protocol.Job{}, err
	}
	return s.decode.Job(body)
}

func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "name", "handler", "agent", "group", "paused", "state", "limit", "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := jobFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	jobs, next, err := s.b.ListJobs(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if jobs == nil {
		jobs = []protocol.Job{}
	}
	writeJSON(w, http.StatusOK, apiv1.JobList{Jobs: jobs, Next: next})
}

func jobFilter(q url.Values) (controller.JobFilter, error) {
	var f controller.JobFilter
	var err error
	get := q.Get
	if f.Limit, f.After, err = paging(q); err != nil {
		return f, err
	}
	if f.Name = get("name"); len(f.Name) > protocol.MaxJobNameLen || !utf8.ValidString(f.Name) {
		return f, invalidf("name", "must be valid UTF-8 of at most %d bytes", protocol.MaxJobNameLen)
	}
	if f.Handler = get("handler"); f.Handler != "" {
		if err := protocol.ValidateName("handler", f.Handler); err != nil {
			return f, err
		}
	}
	if f.Agent = get("agent"); f.Agent != "" {
		if err := protocol.ValidateName("agent", f.Agent); err != nil {
			return f, err
		}
	}
	if f.Group = get("group"); f.Group != "" {
		if _, err := protocol.ParseSelector("group", f.Group); err != nil {
			return f, err
		}
	}
	if q.Has("paused") {
		p, perr := strconv.ParseBool(get("paused"))
		if perr != nil {
			return f, invalidf("paused", "must be true or false, got %q", get("paused"))
		}
		f.Paused = &p
	}
	switch st := strings.ToLower(get("state")); st {
	case "", "live":
	case "retired":
		f.Retired = true
	default:
		return f, invalidf("state", "must be live or retired, got %q", get("state"))
	}
	return f, nil
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := jobIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := s.b.GetJob(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *server) updateJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteAudit(r, "job.update", id, "")
	if err := jobIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := s.decodeJob(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if j.ID != "" && j.ID != id {
		s.fail(w, r, invalidf("id", "%q differs from the id in the path %q", j.ID, id))
		return
	}
	j.ID = id
	updated, err := s.b.UpdateJob(r.Context(), id, j)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, updated)
}

func (s *server) deleteJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteAudit(r, "job.delete", id, "")
	if err := jobIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.b.DeleteJob(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// jobAction serves POST /v1/jobs/{id}:pause|:resume|:trigger.
func (s *server) jobAction(w http.ResponseWriter, r *http.Request) {
	id, action, ok := splitAction(r.PathValue("idaction"))
	if !ok {
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeAPIError(w, http.StatusMethodNotAllowed, apiv1.ErrorBody{Code: apiv1.CodeNotAllowed,
			Message: "POST is not allowed on a job; use PUT to update or POST /v1/jobs/{id}:pause|:resume|:trigger"})
		return
	}
	noteAudit(r, "job."+action, id, "")
	if err := jobIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	switch action {
	case "pause", "resume":
		fn := s.b.PauseJob
		if action == "resume" {
			fn = s.b.ResumeJob
		}
		j, err := fn(ctx, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
	case "trigger":
		e, err := s.b.TriggerJob(ctx, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		noteAudit(r, "job.trigger", id, e.ExecID)
		writeJSON(w, http.StatusOK, e)
	default:
		noteAudit(r, "job.unknown_action", id, "")
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Field: "action",
			Message: "action: unknown job action " + strconv.Quote(action) + " (use :pause, :resume or :trigger)"})
	}
}
