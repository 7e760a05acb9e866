package api_test

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

const (
	adminSecret = "admin-secret-0123456789abcdef"
	readSecret  = "read-secret-fedcba9876543210"
)

func authEnv(t *testing.T) *env {
	return newEnv(t,
		api.Token{Name: "ops", Token: adminSecret, Role: api.RoleAdmin},
		api.Token{Name: "grafana", Token: readSecret, Role: api.RoleRead})
}

func TestAuth(t *testing.T) {
	e := authEnv(t)
	tests := []struct {
		name, token, method, path string
		body                      any
		status                    int
		code                      string
	}{
		{"no token GET", "", "GET", "/v1/jobs", nil, 401, apiv1.CodeUnauthorized},
		{"no token POST", "", "POST", "/v1/jobs", validJob("x"), 401, apiv1.CodeUnauthorized},
		{"wrong token", "not-the-token-0123456789", "GET", "/v1/jobs", nil, 401, apiv1.CodeUnauthorized},
		{"prefix of a token", adminSecret[:20], "GET", "/v1/jobs", nil, 401, apiv1.CodeUnauthorized},
		{"token plus suffix", adminSecret + "x", "GET", "/v1/jobs", nil, 401, apiv1.CodeUnauthorized},
		{"read token GET", readSecret, "GET", "/v1/jobs", nil, 200, ""},
		{"read token agents", readSecret, "GET", "/v1/agents", nil, 200, ""},
		{"read token POST", readSecret, "POST", "/v1/jobs", validJob("x"), 403, apiv1.CodeForbidden},
		{"read token DELETE", readSecret, "DELETE", "/v1/jobs/ax-t1-20260101000000-aaaaaa", nil, 403, apiv1.CodeForbidden},
		{"read token trigger", readSecret, "POST", "/v1/jobs/ax-t1-20260101000000-aaaaaa:trigger", nil, 403, apiv1.CodeForbidden},
		{"read token metrics", readSecret, "GET", "/metrics", nil, 200, ""},
		{"no token metrics", "", "GET", "/metrics", nil, 401, apiv1.CodeUnauthorized},
		{"no token healthz", "", "GET", "/healthz", nil, 200, ""},
		{"no token readyz", "", "GET", "/readyz", nil, 200, ""},
		{"admin POST", adminSecret, "POST", "/v1/jobs", validJob("by-admin"), 201, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.tok = tc.token
			r := e.do(tc.method, tc.path, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if ae := r.apiErr(t); ae.Code != tc.code {
					t.Fatalf("code %q, want %q", ae.Code, tc.code)
				}
			}
			if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Error("401 without WWW-Authenticate: Bearer")
			}
		})
	}
	e.tok = readSecret
	r := e.do("GET", "/v1/jobs", nil)
	l := decode[apiv1.JobList](t, r)
	if len(l.Jobs) != 1 || l.Jobs[0].Name != "by-admin" {
		t.Fatalf("want only the admin's job, got %s", r.body)
	}
	id := l.Jobs[0].ID

	e.tok = adminSecret
	if r := e.do("POST", "/v1/jobs/"+id+":pause", nil); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/jobs/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}

	logs := e.logs.String()
	for _, secret := range []string{adminSecret, readSecret, "not-the-token", adminSecret[:20]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log contains a token %q:\n%s", secret, logs)
		}
	}
	wantLines := []string{
		`msg=audit who=ops what=job.create status=201 .*job=` + id,
		`msg=audit who=ops what=job.pause status=200 .*job=` + id,
		`msg=audit who=ops what=job.delete status=204 .*job=` + id,
		`msg=audit who=grafana what=job.create status=403`,
		`msg=audit who=grafana what=job.delete status=403 .*job=ax-t1-20260101000000-aaaaaa`,
		`msg=audit who=grafana what=job.trigger status=403`,
		`msg=audit who=unauthenticated what=job.create status=401`,
	}
	for _, w := range wantLines {
		if !regexp.MustCompile(w).MatchString(logs) {
			t.Errorf("no audit line matching %q in:\n%s", w, logs)
		}
	}
	// One audit line per mutating call: 7 POST/DELETE above, no GETs.
	if n := strings.Count(logs, "msg=audit"); n != 7 {
		t.Errorf("%d audit lines, want 7:\n%s", n, logs)
	}
}

func TestAuditWithoutAuth(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/jobs", validJob("anon"))
	id := decode[protocol.Job](t, r).ID
	r = e.do("POST", "/v1/jobs", with("schedule", map[string]any{"cron": "bad"}))
	if r.status != 400 {
		t.Fatalf("bad create: %d", r.status)
	}
	logs := e.logs.String()
	if !regexp.MustCompile(`msg=audit who=anonymous what=job.create status=201 .*job=` + id).MatchString(logs) {
		t.Errorf("no audit line for the create:\n%s", logs)
	}
	if !regexp.MustCompile(`msg=audit who=anonymous what=job.create status=400 .*error=invalid`).MatchString(logs) {
		t.Errorf("no audit line for the rejected create:\n%s", logs)
	}
}

func TestValidateTokens(t *testing.T) {
	ok := api.Token{Name: "ops", Token: adminSecret, Role: api.RoleAdmin}
	tests := []struct {
		name   string
		tokens []api.Token
		field  string
	}{
		{"no name", []api.Token{{Token: adminSecret, Role: api.RoleAdmin}}, "tokens[0].name"},
		{"bad name", []api.Token{{Name: "a b", Token: adminSecret, Role: api.RoleAdmin}}, "tokens[0].name"},
		{"short token", []api.Token{{Name: "a", Token: "short", Role: api.RoleAdmin}}, "tokens[0].token"},
		{"token with space", []api.Token{{Name: "a", Token: "0123456789 abcdefgh", Role: api.RoleAdmin}}, "tokens[0].token"},
		{"bad role", []api.Token{{Name: "a", Token: adminSecret, Role: "root"}}, "tokens[0].role"},
		{"no role", []api.Token{{Name: "a", Token: adminSecret}}, "tokens[0].role"},
		{"duplicate name", []api.Token{ok, {Name: "ops", Token: readSecret, Role: api.RoleRead}}, "tokens[1].name"},
		{"duplicate secret", []api.Token{ok, {Name: "b", Token: adminSecret, Role: api.RoleRead}}, "tokens[1].token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := api.ValidateTokens(tc.tokens)
			if !errors.Is(err, api.ErrConfig) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), adminSecret) {
				t.Fatalf("error shows the secret: %v", err)
			}
			if _, err := api.NewHandler(api.Options{Backend: nopBackend{}, Tokens: tc.tokens}); !errors.Is(err, api.ErrConfig) {
				t.Fatalf("NewHandler accepted bad tokens: %v", err)
			}
		})
	}
	if err := api.ValidateTokens([]api.Token{ok, {Name: "ro", Token: readSecret, Role: api.RoleRead}}); err != nil {
		t.Fatalf("good tokens: %v", err)
	}
	if _, err := api.NewHandler(api.Options{}); !errors.Is(err, api.ErrConfig) {
		t.Fatalf("NewHandler without backend: %v", err)
	}
	if s := ok.String(); strings.Contains(s, adminSecret) {
		t.Fatalf("Token.String shows the secret: %s", s)
	}
}

func TestNoRouteIsJSON(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/nope", nil)
	if ae := r.apiErr(t); r.status != http.StatusNotFound || ae.Code != apiv1.CodeNotFound {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = e.do("PUT", "/v1/agents", nil)
	if ae := r.apiErr(t); r.status != http.StatusMethodNotAllowed || ae.Code != apiv1.CodeNotAllowed || r.header.Get("Allow") == "" {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
}
