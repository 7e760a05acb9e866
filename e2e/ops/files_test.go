package ops

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/pkg/protocol"
)

// TestAlertRulesWellFormed: every alert has a unique name, an expression,
// a parseable for:, a known severity and a summary.
func TestAlertRulesWellFormed(t *testing.T) {
	rules, err := LoadAlertRules(repoPath(t, "configs", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml holds no rules")
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.Alert] {
			t.Errorf("%s: alert name used twice", r.Alert)
		}
		seen[r.Alert] = true
		if strings.TrimSpace(r.Expr) == "" {
			t.Errorf("%s: expr is empty", r.Alert)
		}
		if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") || strings.Count(r.Expr, "{") != strings.Count(r.Expr, "}") {
			t.Errorf("%s: unbalanced brackets in %q", r.Alert, r.Expr)
		}
		if r.For != "" {
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for: %q is not a positive duration", r.Alert, r.For)
			}
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: labels.severity %q is not critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: annotations.summary is empty", r.Alert)
		}
	}
	// The alerts the operations issue asks for.
	for _, want := range []string{"AxExecutionsFailing", "AxRetryBacklog", "AxAgentsWentOffline", "AxScheduleLagHigh", "AxControllerDown",
		"AxReportStreamFilling", "AxReportsNotApplied", "AxReportsUnauthorized"} {
		if !seen[want] {
			t.Errorf("alerts.yml: alert %s is missing", want)
		}
	}
}

// TestPrometheusConfig: the scrape config loads the rule file next to it
// and scrapes the job the rules name.
func TestPrometheusConfig(t *testing.T) {
	path := repoPath(t, "configs", "prometheus", "prometheus.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, f := range cfg.RuleFiles {
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), f)); err != nil {
			t.Errorf("rule_files: %v", err)
		}
	}
	var job bool
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "ax-controller" {
			job = true
			if sc.MetricsPath != "/metrics" {
				t.Errorf("ax-controller: metrics_path = %q, want /metrics", sc.MetricsPath)
			}
			if len(sc.StaticConfigs) == 0 || len(sc.StaticConfigs[0].Targets) == 0 {
				t.Error("ax-controller: no targets")
			}
		}
	}
	if !job {
		t.Error(`no scrape job "ax-controller" (alerts.yml uses up{job="ax-controller"})`)
	}
}

// TestDashboardWellFormed: panels have unique ids, fit the 24-column grid
// and every query has a refId unique within its panel.
func TestDashboardWellFormed(t *testing.T) {
	b, err := os.ReadFile(repoPath(t, "configs", "grafana", "ax.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q empty or used twice", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}

// TestDemoAgentConfigsLoad: the demo agent configs, rendered as
// scripts/demo.sh renders them, decode exactly (no unknown key) into
// agent.Config through agent.LoadConfig and validate; each allowlists only its own device script.
func TestDemoAgentConfigsLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file, id, site, allow string
	}{
		{"edge-7.yaml", "edge-7", "plant-3", "valvectl.sh"},
		{"gw-1.yaml", "gw-1", "hq", "gatewayctl.sh"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rendered := filepath.Join(dir, tc.file)
			if err := os.WriteFile(rendered, renderDemo(t, repoPath(t, "configs", "demo", tc.file), dir), 0o600); err != nil {
				t.Fatal(err)
			}
			// The agent's own loader: unknown keys and bad values are errors.
			noEnv := func(string) (string, bool) { return "", false }
			cfg, err := agent.LoadConfig(rendered, noEnv, nil)
			if err != nil {
				t.Fatalf("unknown or bad key: %v", err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if cfg.ID != tc.id || cfg.Labels["site"] != tc.site {
				t.Errorf("id %q site %q, want %q %q", cfg.ID, cfg.Labels["site"], tc.id, tc.site)
			}
			if want := []string{filepath.Join(dir, tc.allow)}; !slices.Equal(cfg.Exec.Allow, want) {
				t.Errorf("exec.allow = %v, want %v", cfg.Exec.Allow, want)
			}
		})
	}
}

// TestDemoJobs: the demo jobs decode with the API's decoder, cover the
// schedules and targets the quick start promises, and only run commands
// the target agent allowlists.
func TestDemoJobs(t *testing.T) {
	dir := "/opt/ax-demo"
	jobs := demoJobs(t, dir)
	allow := map[string]string{"edge-7": dir + "/valvectl.sh", "gw-1": dir + "/gatewayctl.sh", "site=plant-3": dir + "/valvectl.sh"}
	var kinds []string
	for name, j := range jobs {
		s := j.Schedule
		switch {
		case s.Cron != "":
			kinds = append(kinds, "cron")
		case s.Every != "":
			kinds = append(kinds, "every")
		case s.Delay != "":
			kinds = append(kinds, "delay")
		case s.Asap:
			kinds = append(kinds, "asap")
		}
		target := j.Target.Agent + j.Target.Group
		if j.Target.Group != "" {
			kinds = append(kinds, "group")
		}
		if j.Handler != "exec" {
			t.Errorf("%s: handler %q, want exec (the demo has no HTTP server)", name, j.Handler)
			continue
		}
		cmd := execCommand(t, j)
		if allow[target] != cmd {
			t.Errorf("%s: runs %q on %q, which allowlists %q", name, cmd, target, allow[target])
		}
		if j.IdempotencyKey == "" {
			t.Errorf("%s: no idempotency_key: applying the demo twice would make twins", name)
		}
	}
	for _, want := range []string{"cron", "every", "delay", "asap", "group"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no demo job with a %s schedule/target", want)
		}
	}
	retry := jobs["calibrate.yaml"].Retry
	if retry.MaxAttempts < 3 {
		t.Errorf("calibrate.yaml: retry.max_attempts %d < 3: it fails twice before it succeeds", retry.MaxAttempts)
	}
}

// TestDemoDeviceScripts runs the device stand-ins as the exec handler
// would: calibrate fails (retryably) on attempts 1 and 2 and succeeds on 3.
func TestDemoDeviceScripts(t *testing.T) {
	script := repoPath(t, "configs", "demo", "valvectl.sh")
	for _, tc := range []struct {
		args    []string
		attempt string
		code    int
	}{
		{[]string{"calibrate"}, "1", 75},
		{[]string{"calibrate"}, "2", 75},
		{[]string{"calibrate"}, "3", 0},
		{[]string{"set", "--site", "plant-3"}, "1", 0},
		{[]string{"fwcheck"}, "1", 0},
		{[]string{"bogus"}, "1", 64},
	} {
		cmd := exec.Command(script, tc.args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "AX_ATTEMPT=" + tc.attempt, "AX_EXEC_ID=x"}
		err := cmd.Run()
		code := exitCode(t, err)
		if code != tc.code {
			t.Errorf("valvectl.sh %v (attempt %s): exit %d, want %d", tc.args, tc.attempt, code, tc.code)
		}
	}
	gw := repoPath(t, "configs", "demo", "gatewayctl.sh")
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{"refresh-cache"}, 0}, {[]string{"close-order", "ORD-1"}, 0}, {[]string{"close-order"}, 64}} {
		err := exec.Command(gw, tc.args...).Run()
		code := exitCode(t, err)
		if code != tc.code {
			t.Errorf("gatewayctl.sh %v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
}

// TestDemoControllerConfigKeys: every key of the demo controller config is
// a key of the documented sample configs/ax-controller.yaml (which the CLI
// tests load), and the demo stays on loopback without auth.
func TestDemoControllerConfigKeys(t *testing.T) {
	keys := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		flat := map[string]any{}
		var walk func(string, map[string]any)
		walk = func(prefix string, m map[string]any) {
			for k, v := range m {
				if sub, ok := v.(map[string]any); ok {
					walk(prefix+k+".", sub)
					continue
				}
				flat[prefix+k] = v
			}
		}
		walk("", m)
		return flat
	}
	sample := keys(repoPath(t, "configs", "ax-controller.yaml"))
	demo := keys(repoPath(t, "configs", "demo", "ax-controller.yaml"))
	for k := range demo {
		if _, ok := sample[k]; !ok {
			t.Errorf("configs/demo/ax-controller.yaml: key %s is not in configs/ax-controller.yaml", k)
		}
	}
	if demo["nats.host"] != "127.0.0.1" || !strings.HasPrefix(demo["api.listen"].(string), "127.0.0.1:") {
		t.Errorf("demo must stay on loopback: nats.host %v, api.listen %v", demo["nats.host"], demo["api.listen"])
	}
}

// execCommand returns the command of an exec job's payload.
// exitCode is the exit code of a command that ran with err as its
// outcome (0 for none); an error other than an exit fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func execCommand(t *testing.T, j protocol.Job) string {
	t.Helper()
	var p struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(j.Payload, &p); err != nil {
		t.Fatalf("%s: payload: %v", j.Name, err)
	}
	return p.Command
}
