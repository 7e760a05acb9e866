package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

func TestHealthReadyMetrics(t *testing.T) {
	e := newEnv(t)
	if r := e.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/readyz", nil); r.status != 200 || !strings.Contains(string(r.body), "ready") {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	r := e.do("GET", "/metrics", nil)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if err := e.ctrl.Close(); err != nil {
		t.Fatal(err)
	}
	// A closed controller is not ready, and its API says so with 503s.
	r = e.do("GET", "/readyz", nil)
	if ae := r.apiErr(t); r.status != 503 || ae.Code != apiv1.CodeUnavailable {
		t.Fatalf("readyz after close: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/jobs", nil)
	if ae := r.apiErr(t); r.status != 503 || ae.Code != apiv1.CodeUnavailable {
		t.Fatalf("list after close: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz after close: %d", r.status)
	}
}

// nopBackend answers every call with ErrNotReady; tests embed it and
// override single methods.
type nopBackend struct{}

func (nopBackend) Ready(context.Context) error { return controller.ErrNotReady }
func (nopBackend) CreateJob(context.Context, protocol.Job) (protocol.Job, error) {
	return protocol.Job{}, controller.ErrNotReady
}
func (nopBackend) CreateJobs(context.Context, []protocol.Job) ([]controller.JobResult, error) {
	return nil, controller.ErrNotReady
}
func (nopBackend) GetJob(context.Context, string) (protocol.Job, error) {
	return protocol.Job{}, controller.ErrNotReady
}
func (nopBackend) ListJobs(context.Context, controller.JobFilter) ([]protocol.Job, string, error) {
	return nil, "", controller.ErrNotReady
}
func (nopBackend) UpdateJob(context.Context, string, protocol.Job) (protocol.Job, error) {
	return protocol.Job{}, controller.ErrNotReady
}
func (nopBackend) DeleteJob(context.Context, string) error { return controller.ErrNotReady }
func (nopBackend) PauseJob(context.Context, string) (protocol.Job, error) {
	return protocol.Job{}, controller.ErrNotReady
}
func (nopBackend) ResumeJob(context.Context, string) (protocol.Job, error) {
	return protocol.Job{}, controller.ErrNotReady
}
func (nopBackend) TriggerJob(context.Context, string) (protocol.Execution, error) {
	return protocol.Execution{}, controller.ErrNotReady
}
func (nopBackend) GetExecution(context.Context, string) (protocol.Execution, error) {
	return protocol.Execution{}, controller.ErrNotReady
}
func (nopBackend) ListExecutions(context.Context, controller.ExecFilter) ([]protocol.Execution, string, error) {
	return nil, "", controller.ErrNotReady
}
func (nopBackend) RetryExecution(context.Context, string) (protocol.Execution, error) {
	return protocol.Execution{}, controller.ErrNotReady
}
func (nopBackend) CancelExecution(context.Context, string) (protocol.Execution, error) {
	return protocol.Execution{}, controller.ErrNotReady
}
func (nopBackend) ListAgentPage(context.Context, controller.AgentFilter) (controller.AgentPage, error) {
	return controller.AgentPage{}, controller.ErrNotReady
}

// failingBackend fails GetJob with an internal error and panics in
// ListAgentPage: error paths a healthy controller does not produce on demand.
type failingBackend struct{ nopBackend }

const secretDetail = "kv read /var/lib/ax/jetstream/secret-path: disk on fire"

func (failingBackend) GetJob(context.Context, string) (protocol.Job, error) {
	return protocol.Job{}, errors.New(secretDetail)
}

func (failingBackend) ListAgentPage(context.Context, controller.AgentFilter) (controller.AgentPage, error) {
	panic("agents table corrupted")
}

func TestInternalErrorIsGenericAndLoggedOnce(t *testing.T) {
	e := newEnvBackend(t, failingBackend{})
	r := e.do("GET", "/v1/jobs/ax-t1-20260101000000-aaaaaa", nil)
	ae := r.apiErr(t)
	rid := r.header.Get("X-Request-Id")
	if r.status != http.StatusInternalServerError || ae.Code != apiv1.CodeInternal || rid == "" {
		t.Fatalf("%d %s (request id %q)", r.status, r.body, rid)
	}
	if strings.Contains(ae.Message, "disk") || !strings.Contains(ae.Message, rid) {
		t.Fatalf("message leaks the detail or lacks the request id: %q", ae.Message)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "disk on fire"); n != 1 {
		t.Fatalf("detail logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "request_id="+rid) {
		t.Fatalf("log lacks the request id:\n%s", logs)
	}

	r = e.do("GET", "/v1/agents", nil)
	if ae := r.apiErr(t); r.status != 500 || ae.Code != apiv1.CodeInternal || strings.Contains(ae.Message, "corrupted") {
		t.Fatalf("panic: %d %s", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), "agents table corrupted") {
		t.Fatal("panic not logged")
	}
	// The server survives the panic.
	if r := e.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz after panic: %d", r.status)
	}
	// Not ready is 503 whatever the backend says.
	if r := e.do("GET", "/readyz", nil); r.status != 503 {
		t.Fatalf("readyz: %d", r.status)
	}
}
