package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
)

func main() {
	mode := flag.String("mode", "pending", "pending or soak")
	ctlBin := flag.String("controller", "/tmp/ax-controller", "ax-controller binary")
	agentBin := flag.String("agent", "/tmp/ax-agent", "ax-agent binary")
	keep := flag.Bool("keep", false, "keep the temporary directory (logs, data)")
	n := flag.Int("n", 300000, "pending: delayed one-shot jobs to create")
	batch := flag.Int("batch", 1000, "jobs per POST /v1/jobs:batch (at most 1000)")
	inflight := flag.Int("inflight", 4, "batch calls in flight")
	gets := flag.Int("gets", 200, "pending: timed GETs per listing")
	restarts := flag.String("restart", "term,kill", "pending: controller restarts in order, comma-separated: term (SIGTERM), kill (SIGKILL); empty for none")
	holdTimeout := flag.Duration("hold-timeout", 20*time.Minute, "pending: how long to wait for the agent to hold every run")
	after := flag.Duration("after", 30*time.Second, "pending: how long to watch the controller after each restart")
	steady := flag.Duration("steady", 0, "pending: read the controller's RSS again this long after each restart's ready (e.g. 3m: past the embedded server's per-block subject state, dropped 2 minutes after last use); 0 for not")
	settle := flag.Duration("settle", 0, "pending: how long to wait after the GETs before the first restart (past AX_EVT's 2m de-duplication window, a restart does not read the creates' events back), printing the controller's RSS every 30 s")
	rate := flag.Int("rate", 500, "soak: executions per second")
	periodic := flag.Int("periodic", 250, "soak: periodic jobs (every: 1s); the rest of -rate is asap one-shots")
	duration := flag.Duration("duration", 30*time.Minute, "soak: how long")
	retention := flag.String("retention", "10m", "soak: history.retention of the controller")
	dedupWindow := flag.String("dedup-window", "", "reports.dedup_window of the controller (the live grace, and the streams' Msg-Id window); empty for its default (10m)")
	sample := flag.Duration("sample", 30*time.Second, "soak: sampling interval")
	parts := flag.Bool("parts", false, "soak: with each sample, the size of each stream and of the history index in the controller's data dir (du)")
	pprofAddr := flag.String("pprof", "", "controller --pprof-listen address (e.g. 127.0.0.1:6060), for go tool pprof")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "ax-bench-pending-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pending:", err)
		os.Exit(2)
	}
	var rs []string
	for _, r := range strings.Split(*restarts, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rs = append(rs, r)
		}
	}
	fmt.Printf("ax bench/pending -mode %s, dir %s, load %s, %s\n", *mode, dir, proc.LoadAvg(), time.Now().UTC().Format(time.RFC3339))
	var ok bool
	switch *mode {
	case "pending":
		ok, err = runPending(ctx, dir, *ctlBin, *agentBin, pendingConfig{n: *n, batch: *batch, inflight: *inflight,
			gets: *gets, restarts: rs, holdTimeout: *holdTimeout, after: *after, steady: *steady, settle: *settle, pprof: *pprofAddr, dedupWindow: *dedupWindow})
	case "soak":
		ok, err = runSoak(ctx, dir, *ctlBin, *agentBin, soakConfig{rate: *rate, periodic: *periodic, duration: *duration,
			retention: *retention, dedupWindow: *dedupWindow, sample: *sample, batch: *batch, pprof: *pprofAddr, parts: *parts})
	default:
		err = fmt.Errorf("unknown -mode %q (pending or soak)", *mode)
	}
	fmt.Printf("load at the end %s\n", proc.LoadAvg())
	if *keep || err != nil || !ok {
		fmt.Printf("kept %s (logs: %s)\n", dir, filepath.Join(dir, "*.log"))
	} else {
		os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pending:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// runPending is -mode pending; ok is false when a create failed or a
// restart re-sent a run.
func runPending(ctx context.Context, dir, ctlBin, agentBin string, c pendingConfig) (bool, error) {
	s, err := newSystem(dir, ctlBin, agentBin, "", c.dedupWindow, "")
	if err != nil {
		return false, err
	}
	s.pprof = c.pprof
	defer s.stop()
	ready0, err := s.startReady(ctx, 2*time.Minute)
	if err != nil {
		return false, err
	}
	if err := s.startAgent(ctx); err != nil {
		return false, err
	}
	fmt.Printf("controller ready in %s, agent %s online\n", ready0.Round(time.Millisecond), agentID)

	fmt.Printf("1. create %d one-shot jobs (delay: 30m, exec /bin/true, pinned to %s), %d per batch, %d in flight\n", c.n, agentID, c.batch, c.inflight)
	cr := s.createMany(ctx, c.n, c.batch, c.inflight, pendingJob)
	call := summarize(cr.callLat)
	fmt.Printf("  created %d, failed %d in %s: %.0f jobs/s; batch call %s\n", cr.created, cr.failed, cr.elapsed.Round(time.Millisecond), cr.rate(), call)
	for _, e := range cr.first {
		fmt.Printf("  error: %s\n", e)
	}

	fmt.Println("2. wait until the agent holds every run (its heartbeat's stats.pending = PENDING rows in its SQLite)")
	holdTook, h, err := s.waitHeld(ctx, cr.created, c.holdTimeout)
	if err != nil {
		return false, err
	}
	fmt.Printf("  agent holds %d PENDING (controller sent %d run commands) %s after the last create\n", h.agentPending, h.sent, holdTook.Round(time.Second))
	sn, err := s.snapshot(ctx)
	if err != nil {
		return false, err
	}
	fmt.Printf("  controller RSS %.0f MiB (HWM %.0f), agent RSS %.0f MiB (HWM %.0f), controller data %.0f MiB, agent data %.0f MiB\n",
		sn.ctlRSS, sn.ctlHWM, sn.agentRSS, sn.agentHWM, sn.ctlDisk, sn.agentDisk)

	fmt.Printf("3. %d GETs of each listing, one at a time\n", c.gets)
	before := s.timeGets(ctx, c.gets)

	if c.settle > 0 {
		// The controller that made the creates, watched while it settles:
		// its RSS every 30 s.
		fmt.Printf("  waiting %s (-settle); the controller's RSS every 30 s:\n", c.settle)
		end := time.Now().Add(c.settle)
		for time.Now().Before(end) {
			select {
			case <-time.After(min(30*time.Second, time.Until(end))):
			case <-ctx.Done():
				return false, ctx.Err()
			}
			rss, _ := proc.Mem(s.ctl.PID())
			fmt.Printf("    %s before the end of -settle: controller RSS %.0f MiB\n", time.Until(end).Round(time.Second), rss)
		}
	}
	var rr []restartResult
	for i, how := range c.restarts {
		fmt.Printf("%d. restart the controller (%s)\n", 4+i, how)
		r, err := s.restart(ctx, how, c.after, c.steady)
		if err != nil {
			return false, err
		}
		r.print()
		rr = append(rr, r)
	}
	var afterGets map[string]latStats
	if len(rr) > 0 {
		fmt.Printf("%d. GETs again after the restarts\n", 4+len(rr))
		afterGets = s.timeGets(ctx, c.gets)
	}
	return printPendingSummary(c, cr, call, holdTook, sn, before, afterGets, rr), nil
}

func printPendingSummary(c pendingConfig, cr createStats, call latStats, hold time.Duration, sn snapshot,
	before, after map[string]latStats, rr []restartResult) bool {
	ok := cr.failed == 0
	row := func(k, v string) { fmt.Printf("  %-60s %s\n", k, v) }
	fmt.Printf("\n== summary: %d pending delay: 30m one-shots, 1 agent\n", c.n)
	row("created / failed", fmt.Sprintf("%d / %d", cr.created, cr.failed))
	row("create rate (batch API)", fmt.Sprintf("%.0f jobs/s (%s; batch call p50 %s p99 %s)", cr.rate(), cr.elapsed.Round(time.Millisecond), ms(call.p50), ms(call.p99)))
	row("agent holds all, after the last create", hold.Round(time.Second).String())
	row("controller RSS / HWM", fmt.Sprintf("%.0f / %.0f MiB", sn.ctlRSS, sn.ctlHWM))
	row("agent RSS / HWM", fmt.Sprintf("%.0f / %.0f MiB", sn.agentRSS, sn.agentHWM))
	row("data dir: controller / agent", fmt.Sprintf("%.0f / %.0f MiB", sn.ctlDisk, sn.agentDisk))
	for _, p := range getPaths() {
		b := before[p]
		v := fmt.Sprintf("p50 %s p99 %s max %s", ms(b.p50), ms(b.p99), ms(b.max))
		if a, found := after[p]; found {
			v += fmt.Sprintf("  | after restarts: p50 %s p99 %s max %s", ms(a.p50), ms(a.p99), ms(a.max))
			if a.errs > 0 {
				v += fmt.Sprintf(" (%d errors)", a.errs)
			}
		}
		if b.errs > 0 {
			v += fmt.Sprintf(" (%d errors)", b.errs)
		}
		row("GET "+p, v)
	}
	for _, r := range rr {
		row("restart "+r.how+": stop took", r.stopTook.Round(time.Millisecond).String())
		row("restart "+r.how+": start → ready / → executions reloaded", fmt.Sprintf("%s / %s", r.ready.Round(time.Millisecond), r.reloaded.Round(time.Millisecond)))
		row("restart "+r.how+": pending / pending_resent", fmt.Sprintf("%d / %d (run commands sent: %d)", r.pending, r.resent, r.runsSentAfterRestart))
		row("restart "+r.how+": RSS at ready / +30 s (HWM)", fmt.Sprintf("%.0f / %.0f MiB (%.0f)", r.rssReady, r.rss30, r.hwm30))
		if r.steady > 0 {
			row("restart "+r.how+": RSS +"+r.steady.String(), fmt.Sprintf("%.0f MiB", r.rssSteady))
		}
		row("restart "+r.how+": shards owned, takeovers, lease warnings", fmt.Sprintf("%v→%v (min %v), %v, %d", r.before[mShards], r.after[mShards], r.minShards, r.after[mTakeovers], len(r.leaseWarnings)))
		row("restart "+r.how+": agent holds PENDING after", fmt.Sprintf("%d", r.agentPendingAfter))
		row("restart "+r.how+": a shard lease lapsed or moved", fmt.Sprintf("%v", r.lapsed()))
		if r.resent > 0 {
			ok = false
		}
	}
	verdict := "PASS"
	if !ok {
		verdict = "FAIL (a create failed or a run was re-sent)"
	}
	row("result", verdict)
	return ok
}
