package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

const (
	adminSecret = "admin-secret-0123456789abcdef"
	readSecret  = "read-secret-fedcba9876543210"
)

// serve runs a real controller behind the real API handler.
func serve(t *testing.T, tokens ...api.Token) (*httptest.Server, *controller.Controller) {
	t.Helper()
	return apitest.Serve(t, apitest.Config(t), tokens...)
}

func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func job(name string) protocol.Job {
	return protocol.Job{
		Name:     name,
		Handler:  "exec",
		Payload:  []byte(`{"command":"/bin/true"}`),
		Schedule: schedule.Spec{Every: "1h"},
		Target:   protocol.Target{Agent: "edge-7"},
	}
}

func TestRoundTrip(t *testing.T) {
	srv, _ := serve(t)
	c := newClient(t, srv.URL, "")
	ctx := context.Background()

	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	created, err := c.CreateJob(ctx, job("valve"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetJob(ctx, created.ID)
	if err != nil || got.Name != "valve" || string(got.Payload) != `{"command":"/bin/true"}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	upd := job("valve")
	upd.Priority = 4
	if got, err = c.UpdateJob(ctx, created.ID, upd); err != nil || got.Priority != 4 {
		t.Fatalf("update: %+v %v", got, err)
	}
	if got, err = c.PauseJob(ctx, created.ID); err != nil || !got.Paused {
		t.Fatalf("pause: %v", err)
	}
	paused := true
	if jobs, next, err := c.ListJobs(ctx, client.JobFilter{Paused: &paused}); err != nil || len(jobs) != 1 || next != "" {
		t.Fatalf("list paused: %v %v", jobs, err)
	}
	if got, err = c.ResumeJob(ctx, created.ID); err != nil || got.Paused {
		t.Fatalf("resume: %v", err)
	}
	ex, err := c.TriggerJob(ctx, created.ID)
	if err != nil || ex.JobID != created.ID {
		t.Fatalf("trigger: %+v %v", ex, err)
	}
	if e2, err := c.GetExecution(ctx, ex.ExecID); err != nil || e2.ExecID != ex.ExecID {
		t.Fatalf("get exec: %v", err)
	}
	// A list waits at most 2 s for the history index to hold what the
	// trigger stored; a loaded -race run can take longer, so poll.
	var execs []protocol.Execution
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return fmt.Sprintf("the triggered execution listed (last: %v, %v)", execs, err) }, func() bool {
		execs, err = c.AllExecutions(ctx, client.ExecFilter{JobID: created.ID}, 0)
		return err == nil && len(execs) == 1
	})
	if e2, err := c.CancelExecution(ctx, ex.ExecID); err != nil || e2.State != protocol.StateCancelled {
		t.Fatalf("cancel: %+v %v", e2, err)
	}
	_, err = c.RetryExecution(ctx, ex.ExecID)
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("retry of a cancelled execution: %v, want ErrConflict", err)
	}
	if agents, err := c.ListAgents(ctx); err != nil || len(agents) != 0 {
		t.Fatalf("agents: %v %v", agents, err)
	}
	if err := c.DeleteJob(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, created.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}

func TestTypedErrors(t *testing.T) {
	srv, ctrl := serve(t,
		api.Token{Name: "ops", Token: adminSecret, Role: api.RoleAdmin},
		api.Token{Name: "ro", Token: readSecret, Role: api.RoleRead})
	ctx := context.Background()
	admin := newClient(t, srv.URL, adminSecret)

	// Invalid: the field comes back, and the error is a protocol.ErrInvalid.
	bad := job("x")
	bad.Schedule = schedule.Spec{Cron: "61 * * * *"}
	_, err := admin.CreateJob(ctx, bad)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "schedule.cron" || !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("bad cron: %#v", err)
	}
	if fe, ok := ae.FieldError(); !ok || fe.Field != "schedule.cron" || !errors.Is(fe, protocol.ErrInvalid) || strings.HasPrefix(fe.Reason, "schedule.cron") {
		t.Fatalf("FieldError: %#v", fe)
	}
	if !strings.HasPrefix(err.Error(), "schedule.cron: ") {
		t.Fatalf("Error() = %q", err)
	}

	// Too large.
	big := job("big")
	big.Payload = []byte(`{"command":"/bin/true","stdin":"` + strings.Repeat("x", 40<<10) + `"}`)
	if _, err := admin.CreateJob(ctx, big); !errors.Is(err, protocol.ErrTooLarge) {
		t.Fatalf("big payload: %v", err)
	}

	// Exists, with the id of the holder.
	k := job("keyed")
	k.IdempotencyKey = "k-1"
	first, err := admin.CreateJob(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.CreateJob(ctx, k)
	if !errors.As(err, &ae) || !errors.Is(err, client.ErrExists) || ae.ID != first.ID || errors.Is(err, client.ErrConflict) {
		t.Fatalf("second create: %#v", err)
	}

	// Auth.
	if _, _, err := newClient(t, srv.URL, "").ListJobs(ctx, client.JobFilter{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if _, _, err := newClient(t, srv.URL, "wrong-token-0123456789").ListJobs(ctx, client.JobFilter{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	ro := newClient(t, srv.URL, readSecret)
	if _, _, err := ro.ListJobs(ctx, client.JobFilter{}); err != nil {
		t.Fatalf("read token list: %v", err)
	}
	if err := ro.DeleteJob(ctx, first.ID); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("read token delete: %v", err)
	}

	// An id with a slash stays one path segment and is refused by name.
	if _, err := admin.GetJob(ctx, "a/b?c"); !errors.As(err, &ae) || ae.Field != "id" || !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("id with slash: %#v", err)
	}

	// Not found.
	if _, err := admin.GetExecution(ctx, first.ID+"-1000"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("missing exec: %v", err)
	}

	// Not ready after the controller closes.
	if err := ctrl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Ready(ctx); !errors.Is(err, client.ErrNotReady) {
		t.Fatalf("ready after close: %v", err)
	}
	if _, err := admin.GetJob(ctx, first.ID); !errors.Is(err, client.ErrNotReady) {
		t.Fatalf("get after close: %v", err)
	}
}

// TestNonJSONErrorAnswer: a proxy in front of the API answers with text;
// the client still returns an *APIError with the status.
func TestNonJSONErrorAnswer(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	_, err := newClient(t, proxy.URL, "").GetJob(context.Background(), "ax-t1-20260101000000-aaaaaa")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 502 || !errors.Is(err, client.ErrInternal) || !strings.Contains(ae.Message, "502") {
		t.Fatalf("%#v", err)
	}
}

func TestAllJobsPages(t *testing.T) {
	srv, _ := serve(t)
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if _, err := c.CreateJob(ctx, job(n)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.AllJobs(ctx, client.JobFilter{Limit: 2}, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("AllJobs: %d %v", len(all), err)
	}
	some, err := c.AllJobs(ctx, client.JobFilter{Limit: 2}, 3)
	if err != nil || len(some) != 3 {
		t.Fatalf("AllJobs max 3: %d %v", len(some), err)
	}
	if _, err := c.AllJobs(ctx, client.JobFilter{Limit: 5000}, 0); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("bad limit: %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://h/?q=1", "http://u:p@h/"} {
		if _, err := client.New(bad, ""); !errors.Is(err, client.ErrConfig) {
			t.Errorf("New(%q) = %v, want ErrConfig", bad, err)
		}
	}
	if _, err := client.New("http://h", "a b"); !errors.Is(err, client.ErrConfig) {
		t.Errorf("token with space: %v", err)
	}
	c, err := client.New("https://ax.example.com/prefix/", "t", client.WithHTTPClient(&http.Client{}), client.WithUserAgent("me"))
	if err != nil || c.BaseURL() != "https://ax.example.com/prefix" {
		t.Fatalf("%v %v", c, err)
	}
	if _, err := client.New("http://h", "", client.WithHTTPClient(nil)); !errors.Is(err, client.ErrConfig) {
		t.Errorf("nil http client: %v", err)
	}
}

// TestUnreachable: a transport error is not an *APIError.
func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := newClient(t, url, "").ListAgents(context.Background())
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("closed server: %v", err)
	}
}
