package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
)

// axSystem is ax-controller (embedded NATS) plus one ax-agent with 8
// workers, started from the binaries in binDir.
type axSystem struct {
	binDir string
	pprof  string // --pprof-listen of the controller ("" for none)
	api    string
	ctl    *proc.Proc
	agent  *proc.Proc
	hc     *http.Client
}

func (a *axSystem) name() string { return "ax" }

func (a *axSystem) start(ctx context.Context, dir string, s *sink, periodic int) error {
	natsPort, err := proc.FreePort()
	if err != nil {
		return err
	}
	apiPort, err := proc.FreePort()
	if err != nil {
		return err
	}
	a.api = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	a.hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ctlCfg := fmt.Sprintf("data_dir: %s\nlog:\n  level: warn\nnats:\n  port: %d\napi:\n  listen: 127.0.0.1:%d\n",
		filepath.Join(dir, "ctl"), natsPort, apiPort)
	agentCfg := fmt.Sprintf("id: bench-1\ndata_dir: %s\nworkers: 8\nlog:\n  level: warn\nnats:\n  url: nats://127.0.0.1:%d\nhttp:\n  allow:\n    - %s/hit\n",
		filepath.Join(dir, "agent"), natsPort, s.url)
	for name, body := range map[string]string{"ctl.yaml": ctlCfg, "agent.yaml": agentCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	args := []string{"serve", "--config", filepath.Join(dir, "ctl.yaml")}
	if a.pprof != "" {
		args = append(args, "--pprof-listen", a.pprof)
	}
	if a.ctl, err = proc.Start(filepath.Join(a.binDir, "ax-controller"), filepath.Join(dir, "ctl.log"), nil, args...); err != nil {
		return err
	}
	if err := proc.Poll(ctx, 60*time.Second, 20*time.Millisecond, "controller API up", func() (bool, error) {
		_, err := a.recorded(ctx)
		return err == nil, nil
	}); err != nil {
		return err
	}
	if a.agent, err = proc.Start(filepath.Join(a.binDir, "ax-agent"), filepath.Join(dir, "agent.log"), nil,
		"run", "--config", filepath.Join(dir, "agent.yaml")); err != nil {
		return err
	}
	if err := proc.Poll(ctx, 60*time.Second, 20*time.Millisecond, "agent online", a.online); err != nil {
		return err
	}
	for i := range periodic {
		job := map[string]any{"name": fmt.Sprintf("p%d", i), "handler": "http",
			"payload":  map[string]any{"method": "GET", "url": s.url + "/hit"},
			"schedule": map[string]any{"every": "1s"}, "target": map[string]any{"agent": "bench-1"}}
		if err := a.post(ctx, job); err != nil {
			return err
		}
	}
	return nil
}

func (a *axSystem) online() (bool, error) {
	resp, err := a.hc.Get(a.api + "/v1/agents")
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return bytes.Contains(b, []byte(`"bench-1"`)) && bytes.Contains(b, []byte(`"online":true`)), nil
}

func (a *axSystem) post(ctx context.Context, job map[string]any) error {
	body, err := json.Marshal(job)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.api+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/jobs: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /v1/jobs: %s: %s", resp.Status, b)
	}
	return nil
}

func (a *axSystem) submit(ctx context.Context, url string) error {
	return a.post(ctx, map[string]any{"name": "once", "handler": "http",
		"payload":  map[string]any{"method": "GET", "url": url},
		"schedule": map[string]any{"asap": true}, "target": map[string]any{"agent": "bench-1"}})
}

// recorded reads the controller's count of SUCCESS transitions.
func (a *axSystem) recorded(ctx context.Context) (int, error) {
	return a.metric(ctx, `ax_executions_total{state="SUCCESS"}`)
}

func (a *axSystem) metric(ctx context.Context, series string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.api+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, sc.Err()
}

func (a *axSystem) extra(ctx context.Context) string {
	sk, _ := a.metric(ctx, `ax_executions_total{state="SKIPPED"}`)
	// Report steps applied: 3 per execution that ran (triggered, running,
	// finished) and 1 per SKIPPED record, however many fires it counts.
	steps, _ := a.metric(ctx, `ax_reports_applied_total`)
	ok, _ := a.recorded(ctx)
	return fmt.Sprintf("success=%d skipped=%d steps=%d rss_ctl=%.0fMiB rss_agent=%.0fMiB", ok, sk, steps, rssOf(a.ctl.PID()), rssOf(a.agent.PID()))
}

func (a *axSystem) pids() []int { return []int{a.ctl.PID(), a.agent.PID()} }

// mainPID is the controller's: "main-cpu-ms/exec" is the controller's CPU
// (with its embedded NATS server) per execution.
func (a *axSystem) mainPID() int { return a.ctl.PID() }

func (a *axSystem) stop() {
	if a.agent != nil {
		a.agent.Stop(os.Interrupt, 10*time.Second)
	}
	if a.ctl != nil {
		a.ctl.Stop(os.Interrupt, 10*time.Second)
	}
	a.ctl, a.agent = nil, nil
}
