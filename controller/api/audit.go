package api

import (
	"context"
	"net/http"
	"strings"
)

// auditRecord collects what a mutating request did, for its audit line.
// Handlers fill what/job/exec; the middleware fills who and the status.
type auditRecord struct {
	who     string
	what    string
	job     string
	exec    string
	errCode string
	// jobs are the ids of the jobs a batch created.
	jobs []string
}

type ctxAudit struct{}

func auditFrom(ctx context.Context) *auditRecord {
	rec, _ := ctx.Value(ctxAudit{}).(*auditRecord)
	return rec
}

// noteAudit records the action and its object on the request's audit record.
func noteAudit(r *http.Request, what, job, exec string) {
	if rec := auditFrom(r.Context()); rec != nil {
		rec.what = what
		if job != "" {
			rec.job = job
		}
		if exec != "" {
			rec.exec = exec
		}
	}
}

// audit writes the one audit line of a mutating request.
func (s *server) audit(r *http.Request, rec *auditRecord, status int, rid string) {
	what := rec.what
	attrs := []any{"who", rec.who, "what", what, "status", status, "remote", r.RemoteAddr, "request_id", rid}
	if rec.job != "" {
		attrs = append(attrs, "job", rec.job)
	}
	if len(rec.jobs) > 0 {
		attrs = append(attrs, "jobs", rec.jobs)
	}
	if rec.exec != "" {
		attrs = append(attrs, "exec", rec.exec)
	}
	if rec.errCode != "" {
		attrs = append(attrs, "error", rec.errCode)
	}
	s.log.Info("audit", attrs...)
}

// describe names the action of a mutating request from its method and path
// alone, so that requests refused before their handler runs (401, 403) are
// audited with what they tried: ("job.delete", job id, "").
func describe(r *http.Request) (what, job, exec string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		return r.Method + " " + r.URL.Path, "", ""
	}
	kind, id, _ := strings.Cut(rest, "/")
	action := ""
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		id, action = id[:i], id[i+1:]
	}
	hasAction := action != ""
	switch {
	case kind == "jobs" && id == "" && r.Method == http.MethodPost:
		return "job.create", "", ""
	case kind == "jobs" && hasAction && r.Method == http.MethodPost:
		return "job." + action, id, ""
	case kind == "jobs" && id != "" && r.Method == http.MethodPut:
		return "job.update", id, ""
	case kind == "jobs" && id != "" && r.Method == http.MethodDelete:
		return "job.delete", id, ""
	case kind == "executions" && hasAction && r.Method == http.MethodPost:
		return "exec." + action, "", id
	}
	return r.Method + " " + r.URL.Path, "", ""
}
