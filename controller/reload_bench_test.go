package controller

import (
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// BenchmarkRestartWithPending measures a restart with many delayed
// one-shot jobs pending on one agent (the "close the order 30 minutes
// later" case): AX_BENCH_PENDING jobs (default 20,000, `delay: 30m`),
// created through CreateJobs, then the controller is closed and started
// again on the same store, and timed from New to its log line "executions
// reloaded" (the shards worked again, every PENDING run checked). Metrics:
// ready-ms (Start returned), reloaded-ms, and resent (runs published again).
// AX_BENCH_LOGS=1 prints the restarted controller's log, and
// AX_BENCH_CPUPROFILE=file writes a CPU profile of the restarts alone.
func BenchmarkRestartWithPending(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_PENDING")); err == nil && v > 0 {
		n = v
	}
	srv := natstest.Start(b)
	cfg := testConfig(b, b.TempDir())
	cfg.NATS.URL = srv.URL()
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := startController(b, cfg)
	a := newTestAgent(b, srv.URL(), "edge-1", nil).start()
	_ = a
	ctx := tctx(b)
	spec := protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "30m"}, Target: protocol.Target{Agent: "edge-1"}}
	for done := 0; done < n; {
		k := min(MaxBatchJobs, n-done)
		jobs := make([]protocol.Job, k)
		for i := range jobs {
			jobs[i] = spec
		}
		mustCreateJobs(b, ctx, c, jobs)
		done += k
	}
	var ready, reloaded, resent float64
	for b.Loop() {
		b.StopTimer()
		_ = c.Close()
		logs := &testutil.Buffer{}
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		cfg.Registry = nil
		var prof *os.File
		if path := os.Getenv("AX_BENCH_CPUPROFILE"); path != "" {
			var err error
			if prof, err = os.Create(path); err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		c = startController(b, cfg)
		ready += float64(time.Since(t0).Milliseconds())
		rec := waitLogRecord(b, 5*time.Minute, logs, "executions reloaded", func(rec map[string]any) bool { return rec["pending"] == float64(n) })
		resent += rec["pending_resent"].(float64)
		reloaded += float64(time.Since(t0).Milliseconds())
		if prof != nil {
			pprof.StopCPUProfile()
			_ = prof.Close()
		}
		if os.Getenv("AX_BENCH_LOGS") != "" {
			b.Logf("t0=%s\n%s", t0.Format(time.RFC3339Nano), logs.String())
		}
	}
	b.ReportMetric(ready/float64(b.N), "ready-ms")
	b.ReportMetric(reloaded/float64(b.N), "reloaded-ms")
	b.ReportMetric(resent/float64(b.N), "resent")
}
