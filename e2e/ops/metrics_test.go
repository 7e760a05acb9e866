package ops

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// exportedMetrics starts a real controller (embedded NATS on a random
// port, store in t.TempDir()), drives it until every metric family it
// registers has a sample — the demo jobs are created (assign commands),
// one undecodable report is published (a rejected report) and agent
// edge-7 registers and sends a heartbeat with stats (the per-agent
// gauges), and the API handler is made on the controller's registry, as
// serve does, and refuses one oversize request (ax_api_rejected_total) —
// and returns the series names it exports. Histograms count as name_bucket, name_sum
// and name_count, as Prometheus stores them.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := controller.New(controller.Config{DataDir: t.TempDir(), NATS: controller.NATSConfig{Port: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	for name, j := range demoJobs(t, "/opt/ax-demo") {
		if _, err := c.CreateJob(ctx, j); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	nc, js := natstest.JetStream(t, c.NATSURL(), nats.CustomInboxPrefix(protocol.InboxPrefix("edge-7"))) // as ax-agent: the responders answer only there
	if _, err := js.Publish(ctx, protocol.ReportSubject(0, "edge-7"), []byte("not a report")); err != nil {
		t.Fatalf("publish report: %v", err)
	}

	agentHeartbeat(ctx, t, nc, "edge-7", protocol.Stats{OutboxDepth: 3, QueueDepth: 2, Running: 1})
	apiRejectOversize(t, c)

	// Vector metrics appear once they have a child: poll until they do.
	want := []string{"ax_commands_total", "ax_reports_rejected_total", "ax_api_rejected_total",
		"ax_agent_outbox_depth", "ax_agent_queue_depth", "ax_agent_running"}
	for {
		names := gatherNames(t, c)
		missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return names[n] })
		if len(missing) == 0 {
			return names
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the controller never exported %v (exported: %v)", missing, sortedKeys(names))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// agentHeartbeat registers agent id as ax-agent does and sends one
// heartbeat carrying st; both must be accepted.
func agentHeartbeat(ctx context.Context, t *testing.T, nc *nats.Conn, id string, st protocol.Stats) {
	t.Helper()
	reg, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: id, Labels: map[string]string{"site": "plant-3"},
		Handlers: []string{"exec"}, Version: "opscheck", OS: "linux", Arch: "arm64", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.RequestWithContext(ctx, protocol.RegisterSubject(id), reg)
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	if rr, err := protocol.DecodeRegisterReply(msg.Data); err != nil || rr.Error != "" {
		t.Fatalf("register %s: reply %+v, %v", id, rr, err)
	}
	hb, err := protocol.Encode(protocol.Heartbeat{V: protocol.Version, Agent: id, SentAt: time.Now(), Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	msg, err = nc.RequestWithContext(ctx, protocol.HeartbeatSubject(id), hb)
	if err != nil {
		t.Fatalf("heartbeat %s: %v", id, err)
	}
	if hr, err := protocol.DecodeHeartbeatReply(msg.Data); err != nil || hr.Error != "" {
		t.Fatalf("heartbeat %s: reply %+v, %v", id, hr, err)
	}
}

// apiRejectOversize makes the API handler on c's registry, as serve does,
// and sends it one job body over the size limit, which it must refuse
// with 413.
func apiRejectOversize(t *testing.T, c *controller.Controller) {
	t.Helper()
	h, err := api.NewHandler(api.Options{Backend: c, Metrics: c.Registry(), Registerer: c.Registry(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"name":"` + strings.Repeat("x", protocol.MaxMessageSize) + `"}`
	req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize POST /v1/jobs: status %d, want 413: %s", rec.Code, rec.Body)
	}
}

func gatherNames(t *testing.T, c *controller.Controller) map[string]bool {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if m := mf.GetMetric(); len(m) > 0 && m[0].GetHistogram() != nil {
			for _, s := range HistogramSeries(mf.GetName()) {
				names[s] = true
			}
		}
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpsFilesUseExportedMetrics: every ax_* metric named in the alert
// rules and the dashboard is exported by a real controller, and the
// dashboard shows every metric family the controller exports.
func TestOpsFilesUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)

	rules, err := LoadAlertRules(repoPath(t, "configs", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	targets, err := DashboardExprs(repoPath(t, "configs", "grafana", "ax.json"))
	if err != nil {
		t.Fatal(err)
	}
	type use struct{ where, expr string }
	var uses []use
	for _, r := range rules {
		uses = append(uses, use{"alerts.yml: " + r.Alert, r.Expr})
	}
	for _, tg := range targets {
		uses = append(uses, use{"ax.json: " + tg.Panel + " " + tg.RefID, tg.Expr})
	}
	usedByDashboard := map[string]bool{}
	for _, u := range uses {
		names := MetricNames(u.expr)
		if strings.HasPrefix(u.where, "ax.json") {
			if len(names) == 0 {
				t.Errorf("%s: query uses no ax_* metric: %s", u.where, u.expr)
			}
			for _, n := range names {
				usedByDashboard[n] = true
			}
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: metric %s is not exported by the controller (exported: %v)", u.where, n, sortedKeys(exported))
			}
		}
	}
	for n := range exported {
		family := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suf); ok && exported[base] {
				family = base
			}
		}
		if family != n {
			continue
		}
		shown := usedByDashboard[n]
		for _, s := range HistogramSeries(n) {
			shown = shown || usedByDashboard[s]
		}
		if !shown {
			t.Errorf("ax.json: the controller exports %s but no panel shows it", n)
		}
	}
}

// TestMetricNames: names are found in PromQL, label values are not.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`ax_agents_online == 0`, []string{"ax_agents_online"}},
		{`sum(rate(ax_executions_total{state="FAILED"}[5m])) / sum(rate(ax_executions_total[5m]))`, []string{"ax_executions_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(ax_schedule_lag_seconds_bucket[10m])))`, []string{"ax_schedule_lag_seconds_bucket"}},
		{`up{job="ax_controller_not_a_metric"} == 0`, nil},
		{`max_ax_thing + ax_retries_pending`, []string{"ax_retries_pending"}},
	} {
		if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}
