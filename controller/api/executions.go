package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

func (s *server) listExecutions(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "state", "job", "agent", "from", "to", "limit", "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := execFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	execs, next, err := s.b.ListExecutions(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if execs == nil {
		execs = []protocol.Execution{}
	}
	writeJSON(w, http.StatusOK, apiv1.ExecutionList{Executions: execs, Next: next})
}

func execFilter(q url.Values) (controller.ExecFilter, error) {
	var f controller.ExecFilter
	var err error
	if f.Limit, f.After, err = paging(q); err != nil {
		return f, err
	}
	if st := q.Get("state"); st != "" {
		f.State = protocol.State(strings.ToUpper(st))
		if !f.State.Valid() {
			names := make([]string, len(protocol.States))
			for i, s := range protocol.States {
				names[i] = string(s)
			}
			return f, invalidf("state", "unknown state %q (one of %s)", st, strings.Join(names, ", "))
		}
	}
	if f.JobID = q.Get("job"); f.JobID != "" {
		if err := protocol.ValidateJobID("job", f.JobID); err != nil {
			return f, err
		}
	}
	if f.Agent = q.Get("agent"); f.Agent != "" {
		if err := protocol.ValidateName("agent", f.Agent); err != nil {
			return f, err
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, invalidf(p.name, "%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", v)
			}
			*p.dst = t.UTC()
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return f, invalidf("to", "must be after from")
	}
	return f, nil
}

func (s *server) getExecution(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := execIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := s.b.GetExecution(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// execAction serves POST /v1/executions/{id}:retry|:cancel.
func (s *server) execAction(w http.ResponseWriter, r *http.Request) {
	id, action, ok := splitAction(r.PathValue("idaction"))
	if !ok {
		w.Header().Set("Allow", "GET")
		writeAPIError(w, http.StatusMethodNotAllowed, apiv1.ErrorBody{Code: apiv1.CodeNotAllowed,
			Message: "POST is not allowed on an execution; use POST /v1/executions/{id}:retry|:cancel"})
		return
	}
	noteAudit(r, "exec."+action, "", id)
	if err := execIDParam(id); err != nil {
		s.fail(w, r, err)
		return
	}
	var fn func(ctx context.Context, id string) (protocol.Execution, error)
	switch action {
	case "retry":
		fn = s.b.RetryExecution
	case "cancel":
		fn = s.b.CancelExecution
	default:
		noteAudit(r, "exec.unknown_action", "", id)
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Field: "action",
			Message: "action: unknown execution action " + strconv.Quote(action) + " (use :retry or :cancel)"})
		return
	}
	if jobID, _, err := protocol.ParseExecID("id", id); err == nil {
		noteAudit(r, "exec."+action, jobID, id)
	}
	e, err := fn(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (s *server) listAgents(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "label", "online", "version", "limit", "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := agentFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.b.ListAgentPage(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if page.Agents == nil {
		page.Agents = []protocol.AgentInfo{}
	}
	writeJSON(w, http.StatusOK, apiv1.AgentPage{Agents: page.Agents, Next: page.Next, Counts: page.Counts})
}

// agentFilter reads GET /v1/agents' parameters: label (a selector),
// online (true or false), version, limit and after.
func agentFilter(q url.Values) (controller.AgentFilter, error) {
	var f controller.AgentFilter
	var err error
	if f.Limit, f.After, err = paging(q); err != nil {
		return f, err
	}
	if f.Label = q.Get("label"); f.Label != "" {
		if _, err := protocol.ParseSelector("label", f.Label); err != nil {
			return f, err
		}
	}
	if v := q.Get("online"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, invalidf("online", "must be true or false, got %q", v)
		}
		f.Online = &b
	}
	if f.Version = q.Get("version"); len(f.Version) > 64 || !utf8.ValidString(f.Version) {
		return f, invalidf("version", "must be valid UTF-8 of at most 64 bytes")
	}
	return f, nil
}
