package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// maxBatch is the most jobs POST /v1/jobs:batch takes in one call.
const maxBatch = 1000

// soakConfig are the flags of -mode soak.
type soakConfig struct {
	rate, periodic, batch int
	duration, sample      time.Duration
	retention             string
	dedupWindow           string // reports.dedup_window ("": the controller's default)
	pprof                 string // the controller's --pprof-listen address ("": off)
	parts                 bool   // print the size of each stream and of the history index with each sample
}

// sink is the HTTP endpoint the soak's jobs GET (cheaper than a fork per run).
type sink struct {
	url  string
	hits atomic.Int64
	srv  *http.Server
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sink listen: %w", err)
	}
	s := &sink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// soakSample is one line of the soak.
type soakSample struct {
	at                time.Duration
	rss               float64
	jobs, execs, evts uint64
	disk              float64
	done, hits        float64
	submitted, failed int64
	behind            int64
}

// runSoak is -mode soak: periodic jobs plus asap one-shots at the rest of
// the rate, sampled every c.sample; ok is false when a create failed.
func runSoak(ctx context.Context, dir, ctlBin, agentBin string, c soakConfig) (bool, error) {
	sk, err := startSink()
	if err != nil {
		return false, err
	}
	defer sk.srv.Close()
	s, err := newSystem(dir, ctlBin, agentBin, c.retention, c.dedupWindow, sk.url)
	if err != nil {
		return false, err
	}
	s.pprof = c.pprof
	defer s.stop()
	if _, err := s.startReady(ctx, 2*time.Minute); err != nil {
		return false, err
	}
	if err := s.startAgent(ctx); err != nil {
		return false, err
	}
	if err := s.connectNATS(); err != nil {
		return false, err
	}
	periodic := min(c.periodic, c.rate)
	pc := s.createMany(ctx, periodic, c.batch, 1, func(i int) protocol.Job {
		return httpJob(fmt.Sprintf("soak-every-%04d", i), sk.url, schedule.Spec{Every: "1s"})
	})
	if pc.failed > 0 {
		return false, fmt.Errorf("create periodic jobs: %d failed, first: %v", pc.failed, pc.first)
	}
	oneShot := c.rate - periodic
	fmt.Printf("soak: %d periodic jobs (every: 1s) + %d asap one-shots/s for %s, history.retention %s, reports.dedup_window %s, sample every %s\n",
		periodic, oneShot, c.duration, c.retention, c.dedupWindow, c.sample)

	ctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var submitted, failed, behind atomic.Int64
	var firstErr atomic.Value
	go s.submitOneShots(ctx, oneShot, sk.url, &submitted, &failed, &behind, &firstErr)

	fmt.Printf("%8s %9s %10s %10s %10s %10s %9s %9s %10s %7s %7s\n",
		"elapsed", "ctl_rss", "ax_jobs", "ax_execs", "AX_EVT", "data_MiB", "done/s", "hits/s", "submitted", "failed", "behind")
	t0 := time.Now()
	prev, err := s.soakSample(ctx, t0, sk)
	if err != nil {
		return false, err
	}
	tick := time.NewTicker(c.sample)
	defer tick.Stop()
	for end := false; !end; {
		select {
		case <-ctx.Done():
			end = true // one last sample at the end
		case <-tick.C:
		}
		cur, err := s.soakSample(context.WithoutCancel(ctx), t0, sk)
		if err != nil {
			fmt.Printf("  sample: %v\n", err)
			continue
		}
		w := (cur.at - prev.at).Seconds()
		fmt.Printf("%8s %8.0fM %10d %10d %10d %10.0f %9.0f %9.0f %10d %7d %7d\n",
			cur.at.Round(time.Second), cur.rss, cur.jobs, cur.execs, cur.evts, cur.disk,
			(cur.done-prev.done)/w, (cur.hits-prev.hits)/w, submitted.Load(), failed.Load(), behind.Load())
		if c.parts {
			line, err := partsMiB(context.WithoutCancel(ctx), s.ctlDir())
			if err != nil {
				fmt.Printf("  parts: %v\n", err)
			} else {
				fmt.Printf("  parts MiB: %s\n", line)
			}
		}
		prev = cur
	}
	fmt.Printf("soak: %d one-shots submitted, %d failed\n", submitted.Load(), failed.Load())
	if v := firstErr.Load(); v != nil {
		fmt.Printf("  first error: %v\n", v)
	}
	return failed.Load() == 0, nil
}

func (s *system) soakSample(ctx context.Context, t0 time.Time, sk *sink) (soakSample, error) {
	var o soakSample
	var err error
	o.at = time.Since(t0)
	o.rss, _ = proc.Mem(s.ctl.PID())
	if o.jobs, err = s.streamMsgs(ctx, "KV_ax_jobs"); err != nil {
		return o, err
	}
	if o.execs, err = s.streamMsgs(ctx, "KV_ax_execs"); err != nil {
		return o, err
	}
	if o.evts, err = s.streamMsgs(ctx, protocol.StreamEvents); err != nil {
		return o, err
	}
	if o.disk, err = duMiB(ctx, s.ctlDir()); err != nil {
		return o, err
	}
	m, err := s.metrics(ctx)
	if err != nil {
		return o, err
	}
	for _, st := range []protocol.State{protocol.StateSuccess, protocol.StateFailed, protocol.StateSkipped} {
		o.done += m[fmt.Sprintf(`ax_executions_total{state=%q}`, st)]
	}
	o.hits = float64(sk.hits.Load())
	return o, nil
}

// submitOneShots sends perSec asap jobs a second, in ten batches a second,
// one call at a time; a tick missed because the previous call was still
// running counts in behind (its jobs are added to the next batch).
func (s *system) submitOneShots(ctx context.Context, perSec int, sinkURL string, submitted, failed, behind *atomic.Int64, firstErr *atomic.Value) {
	if perSec <= 0 {
		return
	}
	const ticks = 10
	tick := time.NewTicker(time.Second / ticks)
	defer tick.Stop()
	owed, seq := 0.0, 0
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			owed += float64(perSec) * now.Sub(last).Seconds()
			if now.Sub(last) > 2*time.Second/ticks {
				behind.Add(1)
			}
			last = now
		}
		for owed >= 1 && ctx.Err() == nil {
			k := min(int(owed), maxBatch)
			jobs := make([]protocol.Job, k)
			for i := range jobs {
				seq++
				jobs[i] = httpJob(fmt.Sprintf("soak-once-%08d", seq), sinkURL, schedule.Spec{Asap: true})
			}
			st := s.createBatch(ctx, jobs)
			if ctx.Err() != nil {
				return
			}
			owed -= float64(k)
			submitted.Add(int64(st.created))
			failed.Add(int64(st.failed))
			if len(st.first) > 0 && firstErr.Load() == nil {
				firstErr.Store(st.first[0])
			}
		}
	}
}

// partsMiB returns the size of each stream's directory and of each file
// of the history index under the controller's data dir ctlDir, as
// "NAME SIZE" pairs in name order.
func partsMiB(ctx context.Context, ctlDir string) (string, error) {
	streamDirs, err := filepath.Glob(filepath.Join(ctlDir, "jetstream", "*", "streams", "*"))
	if err != nil {
		return "", fmt.Errorf("parts: %w", err)
	}
	index, err := filepath.Glob(filepath.Join(ctlDir, "history.db*"))
	if err != nil {
		return "", fmt.Errorf("parts: %w", err)
	}
	paths := append(streamDirs, index...)
	sort.Slice(paths, func(i, j int) bool { return filepath.Base(paths[i]) < filepath.Base(paths[j]) })
	var b strings.Builder
	for _, p := range paths {
		mib, err := duMiB(ctx, p)
		if err != nil {
			return "", err
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f", filepath.Base(p), mib)
	}
	return b.String(), nil
}
