package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// pendingConfig are the flags of -mode pending.
type pendingConfig struct {
	n, batch, inflight, gets int
	restarts                 []string // "term", "kill"
	holdTimeout, after       time.Duration
	settle                   time.Duration // wait before the first restart
	// steady is how long after ready a restart's RSS is read again (0:
	// not): past the embedded server's per-block subject state, dropped
	// 2 minutes after the blocks were last used.
	steady      time.Duration
	pprof       string // the controller's --pprof-listen address ("": off)
	dedupWindow string // reports.dedup_window ("": the controller's default)
}

// getPaths are the listings timed before and after the restarts.
func getPaths() []string {
	return []string{
		"/v1/jobs?limit=50",
		"/v1/executions?limit=50",
		"/v1/jobs?limit=50&agent=" + agentID,
		"/v1/executions?limit=50&agent=" + agentID + "&state=PENDING",
	}
}

// snapshot is the memory and disk use at one moment.
type snapshot struct {
	ctlRSS, ctlHWM, agentRSS, agentHWM float64
	ctlDisk, agentDisk                 float64
}

func (s *system) snapshot(ctx context.Context) (snapshot, error) {
	var sn snapshot
	sn.ctlRSS, sn.ctlHWM = proc.Mem(s.ctl.PID())
	sn.agentRSS, sn.agentHWM = proc.Mem(s.agent.PID())
	var err error
	if sn.ctlDisk, err = duMiB(ctx, s.ctlDir()); err != nil {
		return sn, err
	}
	if sn.agentDisk, err = duMiB(ctx, s.agentDir()); err != nil {
		return sn, err
	}
	return sn, nil
}

// held is how far the runs got: sent by the controller (ax_commands_total
// {kind="run"} of this process) and held PENDING in the agent's SQLite (its
// last heartbeat's stats.pending).
type held struct {
	sent, agentPending int
	heartbeat          time.Time
}

func (s *system) held(ctx context.Context) (held, error) {
	m, err := s.metrics(ctx)
	if err != nil {
		return held{}, err
	}
	a, ok, err := s.agentInfo(ctx)
	if err != nil {
		return held{}, err
	}
	if !ok {
		return held{}, fmt.Errorf("agent %s not listed", agentID)
	}
	return held{sent: int(m[`ax_commands_total{kind="run"}`]), agentPending: a.Stats.Pending, heartbeat: a.HeartbeatAt}, nil
}

// waitHeld waits until the agent's heartbeat counts n PENDING runs.
func (s *system) waitHeld(ctx context.Context, n int, d time.Duration) (time.Duration, held, error) {
	t0 := time.Now()
	var h held
	last := time.Now()
	err := proc.Poll(ctx, d, time.Second, "agent holds every run", func() (bool, error) {
		var err error
		if h, err = s.held(ctx); err != nil {
			return false, nil // the API may be slow under load; poll on
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Printf("  hold: controller sent %d runs, agent holds %d PENDING after %.0fs\n", h.sent, h.agentPending, time.Since(t0).Seconds())
		}
		return h.agentPending >= n, nil
	})
	return time.Since(t0), h, err
}

// timeGets times count sequential GETs of each path.
func (s *system) timeGets(ctx context.Context, count int) map[string]latStats {
	out := map[string]latStats{}
	for _, p := range getPaths() {
		var ds []time.Duration
		var errs int
		var first string
		for range count {
			t0 := time.Now()
			err := s.get(ctx, p)
			ds = append(ds, time.Since(t0))
			if err != nil {
				if errs == 0 {
					first = err.Error()
				}
				errs++
			}
		}
		l := summarize(ds)
		l.errs, l.firstErr = errs, first
		out[p] = l
		fmt.Printf("  GET %-58s %s\n", p, l)
	}
	return out
}

func (s *system) get(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: read body: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, b)
	}
	return nil
}

// restartResult is what one controller restart showed.
type restartResult struct {
	how                   string
	stopTook              time.Duration
	stopKilled            bool
	ready, reloaded       time.Duration
	reloads               int // "executions reloaded" lines
	pending, resent       int
	rssReady, rss30       float64
	rssSteady             float64 // at steady after ready (0: not read)
	steady                time.Duration
	hwm30                 float64
	before, after         map[string]float64
	minShards             float64
	leaseWarnings         []string
	agentPendingAfter     int
	runsSentAfterRestart  int
	agentHeartbeatAdvance bool
}

// Metric series compared across a restart.
const (
	mShards     = "ax_shards_owned"
	mTakeovers  = `ax_lease_takeovers_total{kind="shard"}`
	mGroupTakes = `ax_lease_takeovers_total{kind="group"}`
	mExpiries   = "ax_lease_expiries_total"
)

// restart stops the controller (SIGTERM or SIGKILL), starts it on the same
// data dir and watches it for after (30 s), then reads its RSS again at
// steady after ready (0: not).
func (s *system) restart(ctx context.Context, how string, after, steady time.Duration) (restartResult, error) {
	r := restartResult{how: how, steady: steady}
	var err error
	if r.before, err = s.metrics(ctx); err != nil {
		return r, fmt.Errorf("metrics before %s restart: %w", how, err)
	}
	switch how {
	case "term":
		r.stopTook, r.stopKilled = s.ctl.Stop(syscall.SIGTERM, 120*time.Second)
	case "kill":
		t0 := time.Now()
		s.ctl.Kill()
		r.stopTook = time.Since(t0)
	default:
		return r, fmt.Errorf("restart: unknown kind %q (term or kill)", how)
	}
	if err := s.startController(); err != nil {
		return r, fmt.Errorf("start controller after %s: %w", how, err)
	}
	if r.ready, err = s.waitReady(ctx, 10*time.Minute); err != nil {
		return r, fmt.Errorf("ready after %s: %w", how, err)
	}
	r.rssReady, _ = proc.Mem(s.ctl.PID())
	readyAt := time.Now()
	r.minShards = -1
	for time.Since(readyAt) < after {
		if m, err := s.metrics(ctx); err == nil {
			if v, ok := m[mShards]; ok && (r.minShards < 0 || v < r.minShards) && time.Since(readyAt) > 2*time.Second {
				r.minShards = v
			}
		}
		time.Sleep(time.Second)
	}
	r.rss30, r.hwm30 = proc.Mem(s.ctl.PID())
	if r.after, err = s.metrics(ctx); err != nil {
		return r, fmt.Errorf("metrics after %s restart: %w", how, err)
	}
	r.runsSentAfterRestart = int(r.after[`ax_commands_total{kind="run"}`])
	recs, err := logRecords(s.ctlLog(s.ctlStarts), "executions reloaded")
	if err != nil {
		return r, err
	}
	for _, rec := range recs {
		r.reloads++
		r.pending += rec.num("pending")
		r.resent += rec.num("pending_resent")
		if d := rec.at.Sub(s.ctl.Started()); d > r.reloaded {
			r.reloaded = d
		}
	}
	warns, err := logRecords(s.ctlLog(s.ctlStarts), "shard lease lost", "shard lease not renewed", "shard lease taken over",
		"renew shard lease", "acquire shard lease", "shards not released")
	if err != nil {
		return r, err
	}
	for _, w := range warns {
		r.leaseWarnings = append(r.leaseWarnings, fmt.Sprintf("%v shard=%v", w.fields["msg"], w.fields["shard"]))
	}
	if h, err := s.held(ctx); err == nil {
		r.agentPendingAfter = h.agentPending
	}
	if steady > 0 {
		select {
		case <-time.After(time.Until(readyAt.Add(steady))):
		case <-ctx.Done():
			return r, ctx.Err()
		}
		r.rssSteady, _ = proc.Mem(s.ctl.PID())
	}
	return r, nil
}

func (r restartResult) print() {
	fmt.Printf("  restart (%s): stop took %s%s, ready after %s, %d \"executions reloaded\" line(s), last %s after start: pending=%d pending_resent=%d\n",
		r.how, r.stopTook.Round(time.Millisecond), map[bool]string{true: " (killed after grace)"}[r.stopKilled],
		r.ready.Round(time.Millisecond), r.reloads, r.reloaded.Round(time.Millisecond), r.pending, r.resent)
	fmt.Printf("    RSS at ready %.0f MiB, 30 s later %.0f MiB (HWM %.0f MiB); run commands sent by the new process: %d; agent holds %d PENDING\n",
		r.rssReady, r.rss30, r.hwm30, r.runsSentAfterRestart, r.agentPendingAfter)
	if r.steady > 0 {
		fmt.Printf("    RSS %s after ready %.0f MiB\n", r.steady, r.rssSteady)
	}
	fmt.Printf("    %s before %v after %v (min after ready %v); shard takeovers %v→%v; group takeovers %v→%v; lease expiries %v→%v\n",
		mShards, r.before[mShards], r.after[mShards], r.minShards, r.before[mTakeovers], r.after[mTakeovers],
		r.before[mGroupTakes], r.after[mGroupTakes], r.before[mExpiries], r.after[mExpiries])
	if len(r.leaseWarnings) > 0 {
		fmt.Printf("    lease warnings in the log (%d): %s\n", len(r.leaseWarnings), strings.Join(r.leaseWarnings[:min(5, len(r.leaseWarnings))], "; "))
	} else {
		fmt.Printf("    lease warnings in the log: none\n")
	}
}

// lapsed says whether a shard lease lapsed or moved in the restart.
func (r restartResult) lapsed() bool {
	return len(r.leaseWarnings) > 0 || r.after[mTakeovers] > 0 || (r.minShards >= 0 && r.minShards < r.after[mShards])
}

// pendingJob is the ith delayed one-shot.
func pendingJob(i int) protocol.Job {
	return execJob(fmt.Sprintf("pend-%07d", i), schedule.Spec{Delay: "30m"})
}
