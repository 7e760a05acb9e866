package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/bench/internal/proc"
	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/pkg/protocol"
)

// agentID is the one ax-agent's id; every job is pinned to it.
const agentID = "bench-1"

// system is ax-controller (embedded NATS, nats.auth none) and one ax-agent,
// started from their binaries on a temporary directory.
type system struct {
	dir                string
	ctlBin, agentBin   string
	natsPort, apiPort  int
	api, natsURL       string
	ctl, agent         *proc.Proc
	ctlStarts          int
	cl                 *client.Client
	hc                 *http.Client
	nc                 *nats.Conn
	js                 jetstream.JetStream
	retention, sinkURL string
	// pprof, when set, is the controller's --pprof-listen address.
	pprof string
}

// newSystem writes the configs of a controller and an agent in dir; a
// non-empty retention and dedupWindow set history.retention and
// reports.dedup_window.
func newSystem(dir, ctlBin, agentBin, retention, dedupWindow, sinkURL string) (*system, error) {
	s := &system{dir: dir, ctlBin: ctlBin, agentBin: agentBin, retention: retention, sinkURL: sinkURL}
	var err error
	if s.natsPort, err = proc.FreePort(); err != nil {
		return nil, err
	}
	if s.apiPort, err = proc.FreePort(); err != nil {
		return nil, err
	}
	s.api = fmt.Sprintf("http://127.0.0.1:%d", s.apiPort)
	s.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", s.natsPort)
	s.hc = &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	if s.cl, err = client.New(s.api, "", client.WithHTTPClient(s.hc)); err != nil {
		return nil, fmt.Errorf("api client: %w", err)
	}
	ctlCfg := fmt.Sprintf("node: bench\ndata_dir: %s\nlog:\n  level: info\n  format: json\nnats:\n  port: %d\napi:\n  listen: 127.0.0.1:%d\n",
		s.ctlDir(), s.natsPort, s.apiPort)
	if retention != "" {
		ctlCfg += fmt.Sprintf("history:\n  retention: %s\n", retention)
	}
	if dedupWindow != "" {
		ctlCfg += fmt.Sprintf("reports:\n  dedup_window: %s\n", dedupWindow)
	}
	agentCfg := fmt.Sprintf("id: %s\ndata_dir: %s\nworkers: 8\nlog:\n  level: warn\nnats:\n  url: %s\nexec:\n  allow:\n    - /bin/true\n",
		agentID, s.agentDir(), s.natsURL)
	if sinkURL != "" {
		agentCfg += fmt.Sprintf("http:\n  allow:\n    - %s/hit\n", sinkURL)
	}
	for name, body := range map[string]string{"ctl.yaml": ctlCfg, "agent.yaml": agentCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return s, nil
}

func (s *system) ctlDir() string   { return filepath.Join(s.dir, "ctl") }
func (s *system) agentDir() string { return filepath.Join(s.dir, "agent") }

// ctlLog is the log of the controller's nth start (1-based).
func (s *system) ctlLog(n int) string { return filepath.Join(s.dir, fmt.Sprintf("ctl-%d.log", n)) }

// startController starts a controller process and returns without waiting.
func (s *system) startController() error {
	s.ctlStarts++
	args := []string{"serve", "--config", filepath.Join(s.dir, "ctl.yaml")}
	if s.pprof != "" {
		args = append(args, "--pprof-listen", s.pprof)
	}
	p, err := proc.Start(s.ctlBin, s.ctlLog(s.ctlStarts), axFreeEnv(), args...)
	if err != nil {
		return err
	}
	s.ctl = p
	return nil
}

// startReady starts the controller and waits up to d until it is ready
// (waitReady).
func (s *system) startReady(ctx context.Context, d time.Duration) (time.Duration, error) {
	if err := s.startController(); err != nil {
		return 0, err
	}
	return s.waitReady(ctx, d)
}

// waitReady polls /readyz every 20 ms; it returns the time from the
// process start until the first 200.
func (s *system) waitReady(ctx context.Context, d time.Duration) (time.Duration, error) {
	var at time.Time
	err := proc.Poll(ctx, d, 20*time.Millisecond, "controller /readyz", func() (bool, error) {
		if s.ctl.Exited() {
			return false, fmt.Errorf("controller exited (log %s)", s.ctlLog(s.ctlStarts))
		}
		if s.cl.Ready(ctx) != nil {
			return false, nil
		}
		at = time.Now()
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	return at.Sub(s.ctl.Started()), nil
}

// connectNATS opens the connection used for stream info.
func (s *system) connectNATS() error {
	nc, err := nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connect %s: %w", s.natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream: %w", err)
	}
	s.nc, s.js = nc, js
	return nil
}

// streamMsgs returns the message count of a stream (KV_ax_jobs: the keys,
// with their kept revisions, of bucket ax_jobs).
func (s *system) streamMsgs(ctx context.Context, name string) (uint64, error) {
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	return st.CachedInfo().State.Msgs, nil
}

// startAgent starts the agent and waits until the controller lists it online.
func (s *system) startAgent(ctx context.Context) error {
	p, err := proc.Start(s.agentBin, filepath.Join(s.dir, "agent.log"), axFreeEnv(), "run", "--config", filepath.Join(s.dir, "agent.yaml"))
	if err != nil {
		return err
	}
	s.agent = p
	return proc.Poll(ctx, 60*time.Second, 100*time.Millisecond, "agent online", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("agent exited (log %s)", filepath.Join(s.dir, "agent.log"))
		}
		a, ok, _ := s.agentInfo(ctx)
		return ok && a.Online, nil
	})
}

// agentInfo returns the controller's record of the agent (its Stats are
// from its last heartbeat: Pending counts the PENDING rows of its SQLite).
func (s *system) agentInfo(ctx context.Context) (protocol.AgentInfo, bool, error) {
	as, err := s.cl.ListAgents(ctx)
	if err != nil {
		return protocol.AgentInfo{}, false, fmt.Errorf("list agents: %w", err)
	}
	for _, a := range as {
		if a.Agent == agentID {
			return a, true, nil
		}
	}
	return protocol.AgentInfo{}, false, nil
}

// metrics scrapes the controller's /metrics into series → value.
func (s *system) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	return out, nil
}

// logRecord is one JSON line of a controller log, with its parsed time.
type logRecord struct {
	at     time.Time
	fields map[string]any
}

// logRecords returns the JSON lines of the log at path whose msg
// contains one of msgs.
func logRecords(path string, msgs ...string) ([]logRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	var out []logRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		msg, _ := m["msg"].(string)
		for _, want := range msgs {
			if strings.Contains(msg, want) {
				at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"]))
				out = append(out, logRecord{at: at, fields: m})
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read log %s: %w", path, err)
	}
	return out, nil
}

func (r logRecord) num(k string) int {
	v, _ := r.fields[k].(float64)
	return int(v)
}

// stop stops the agent, then the controller.
func (s *system) stop() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.agent != nil && !s.agent.Exited() {
		s.agent.Stop(syscall.SIGTERM, 20*time.Second)
	}
	if s.ctl != nil && !s.ctl.Exited() {
		s.ctl.Stop(syscall.SIGTERM, 60*time.Second)
	}
}

// axFreeEnv is the environment of the processes the system starts: this
// one's without the AX_* settings of the caller's shell (AX_NATS_URL would
// make serve use an external server).
func axFreeEnv() []string { return proc.EnvWithout("AX_") }
