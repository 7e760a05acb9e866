package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
)

// rejectedTooLarge reads ax_api_rejected_total{reason="too_large"} from the
// controller's registry (0 when the series does not exist yet).
func rejectedTooLarge(t *testing.T, c *controller.Controller) float64 {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ax_api_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == api.RejectTooLarge {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestOversizeBodyIsCounted: every 413 (a body over the limit, a payload
// over its own limit) increments ax_api_rejected_total{reason="too_large"}
// on the Registerer; other client errors do not; a second handler on the
// same registry shares the counter.
func TestOversizeBodyIsCounted(t *testing.T) {
	ctrl := startController(t)
	newHandler := func() *env {
		h, err := api.NewHandler(api.Options{Backend: ctrl, Metrics: ctrl.Registry(), Registerer: ctrl.Registry(),
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("NewHandler: %v", err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return &env{t: t, srv: srv, ctrl: ctrl}
	}
	e := newHandler()
	big := `{"name":"` + strings.Repeat("x", 70<<10) + `"}`
	bigPayload := validJob("p")
	bigPayload["payload"] = map[string]any{"blob": strings.Repeat("y", 40<<10)}
	tests := []struct {
		name   string
		e      func() *env
		body   any
		status int
		want   float64 // counter after the request
	}{
		{"body over the limit", func() *env { return e }, big, http.StatusRequestEntityTooLarge, 1},
		{"payload over its limit", func() *env { return e }, bigPayload, http.StatusRequestEntityTooLarge, 2},
		{"malformed body is not counted", func() *env { return e }, `{"name":`, http.StatusBadRequest, 2},
		{"second handler on the same registry", newHandler, big, http.StatusRequestEntityTooLarge, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.e().do("POST", "/v1/jobs", tc.body)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d (%s)", r.status, tc.status, r.body)
			}
			if got := rejectedTooLarge(t, ctrl); got != tc.want {
				t.Errorf("ax_api_rejected_total{reason=too_large} = %v, want %v", got, tc.want)
			}
		})
	}
}
