package security

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
)

type lockedBuf = testutil.Buffer

// TestEnrollAPI: the seed is returned once with Cache-Control: no-store and
// appears in no log line of the controller or the API; bad requests are
// refused with the field named; a read-only token cannot enroll.
func TestEnrollAPI(t *testing.T) {
	var logs lockedBuf
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := controller.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Port = -1
	cfg.NATS.Auth = auth.ModeNKeys
	cfg.Logger = log
	ctl := apitest.Start(t, cfg)
	const adminTok, readTok = "admin-token-0123456789", "read-token-0123456789ab"
	h, err := api.NewHandler(api.Options{Backend: ctl, Logger: log, Tokens: []api.Token{
		{Name: "ops", Token: adminTok, Role: api.RoleAdmin}, {Name: "viewer", Token: readTok, Role: api.RoleRead}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()

	post := func(path, tok, ct, body string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	c, err := client.New(hs.URL, adminTok)
	if err != nil {
		t.Fatal(err)
	}
	en, err := c.EnrollAgent(testutil.Context(t, 60*time.Second), "edge-1", auth.EnrollRequest{Labels: map[string]string{"site": "lab"}})
	if err != nil {
		t.Fatal(err)
	}
	if en.Seed == "" || en.PublicKey == "" || en.Labels["site"] != "lab" {
		t.Fatalf("enrollment %v", en)
	}
	resp, body := post("/v1/agents/edge-2:enroll", adminTok, "", "")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("enroll without body: %d %q %s", resp.StatusCode, resp.Header.Get("Cache-Control"), body)
	}
	if strings.Contains(logs.String(), en.Seed) || !strings.Contains(logs.String(), en.PublicKey) {
		t.Fatal("the seed reached a log line (or the public key did not)")
	}
	if !strings.Contains(logs.String(), "what=agent.enroll") {
		t.Fatal("enrollment not audited")
	}

	for _, tc := range []struct {
		name, path, tok, ct, body string
		status                    int
		field                     string
	}{
		{"read token", "/v1/agents/edge-3:enroll", readTok, "", "", http.StatusForbidden, ""},
		{"bad id", "/v1/agents/edge%203:enroll", adminTok, "", "", http.StatusBadRequest, `"field":"id"`},
		{"bad label", "/v1/agents/edge-3:enroll", adminTok, "application/json", `{"labels":{"bad key":"x"}}`, http.StatusBadRequest, `"field":"labels`},
		{"unknown field", "/v1/agents/edge-3:enroll", adminTok, "application/json", `{"seed":"SU..."}`, http.StatusBadRequest, `"field":"body"`},
		{"not json", "/v1/agents/edge-3:enroll", adminTok, "text/plain", `x`, http.StatusUnsupportedMediaType, ""},
		{"unknown action", "/v1/agents/edge-3:promote", adminTok, "", "", http.StatusNotFound, `"field":"action"`},
		{"enrolled twice", "/v1/agents/edge-1:enroll", adminTok, "", "", http.StatusConflict, ""},
		{"revoke unknown", "/v1/agents/edge-9:revoke", adminTok, "", "", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(tc.path, tc.tok, tc.ct, tc.body)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.field) {
				t.Fatalf("status %d body %s, want %d with %s", resp.StatusCode, body, tc.status, tc.field)
			}
		})
	}
	if _, err := c.RevokeAgent(testutil.Context(t, 60*time.Second), "edge-1"); err != nil {
		t.Fatal(err)
	}
	ro, err := client.New(hs.URL, readTok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.RevokeAgent(testutil.Context(t, 60*time.Second), "edge-2"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("revoke with a read token: %v", err)
	}
}
