package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// BenchmarkEndToEnd measures sustained end-to-end throughput: an embedded
// controller and one agent in this process, both with their default
// configs (agent SQLite synchronous=full, 2×CPU workers; controller KV on
// the JetStream file store, 16 shards), and a no-op Go handler.
//
// The load is periodic: AX_BENCH_JOBS (default 2000) pinned jobs with
// `every: AX_BENCH_EVERY` (default 1s), fired by the agent on its own wheel.
// That is the steady shape of the design's typical work (many device jobs
// every few seconds or minutes), and each job's period is far longer than
// one execution takes, so a job never overlaps itself unless the whole
// pipeline falls behind. The offered load (2000/s by default) is above what
// the system delivers today, so the figure is its capacity, not the offer.
// A burst of asap jobs would mostly measure job creation (one API call, KV
// write and run command per execution) rather than execution throughput.
//
// An execution counts when its SUCCESS event arrives on AX_EVT: the
// controller publishes it after the compare-and-set of the execution's
// record in KV ax_execs, which follows the agent's SQLite commits and its
// triggered, running and finished reports through AX_RPT. Fires dropped
// because the job's previous execution was still live (overlap forbid →
// SKIPPED) are reported as skipped/s and do not count: a non-zero skipped/s
// means the offer exceeds the capacity.
//
// Run with a fixed count, e.g. -benchtime 5000x (setup, including creating
// the jobs, is repeated for the framework's first b.N=1 round).
func BenchmarkEndToEnd(b *testing.B) {
	benchJobs, every := 2000, "1s"
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_JOBS")); err == nil && v > 0 {
		benchJobs = v
	}
	if v := os.Getenv("AX_BENCH_EVERY"); v != "" {
		every = v
	}
	cfg := controller.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.NATS.Port = -1
	cfg.Logger = testutil.Logger().With("who", "controller")
	c := startCtl(b, cfg)

	var success, skipped atomic.Int64
	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	for s, n := range map[protocol.State]*atomic.Int64{protocol.StateSuccess: &success, protocol.StateSkipped: &skipped} {
		if _, err := nc.Subscribe("ax.evt."+string(s)+".>", func(*nats.Msg) { n.Add(1) }); err != nil {
			b.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}

	acfg := agent.DefaultConfig()
	acfg.ID = "bench-1"
	acfg.DataDir = b.TempDir()
	acfg.NATS.URL = c.NATSURL()
	ra := startAgent(b, acfg, agent.WithHandler("noop", noop))
	waitAgentOnline(b, c, "bench-1")

	ctx := context.Background()
	ids := make([]string, 0, benchJobs)
	tc := time.Now()
	for i := range benchJobs {
		j, err := c.CreateJob(ctx, protocol.Job{Name: fmt.Sprintf("bench-%d", i), Handler: "noop",
			Schedule: schedule.Spec{Every: every}, Target: protocol.Target{Agent: "bench-1"}})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	b.Logf("%d jobs every %s created in %s", len(ids), every, time.Since(tc))
	// Warm up: every job has fired and a steady state is reached.
	testutil.EventuallyFunc(b, 5*time.Minute, func() string {
		return fmt.Sprintf("warm-up: %d SUCCESS, %d SKIPPED events after %d jobs", success.Load(), skipped.Load(), len(ids))
	}, func() bool { return success.Load() >= int64(5*benchJobs) })

	b.ResetTimer()
	s0, k0, t0 := success.Load(), skipped.Load(), time.Now()
	testutil.EventuallyFunc(b, 10*time.Minute, func() string {
		return fmt.Sprintf("%d executions in SUCCESS (have %d)", b.N, success.Load()-s0)
	}, func() bool { return success.Load()-s0 >= int64(b.N) })
	el := time.Since(t0)
	b.StopTimer()
	n, k := success.Load()-s0, skipped.Load()-k0
	b.ReportMetric(float64(n)/el.Seconds(), "execs/s")
	b.ReportMetric(float64(k)/el.Seconds(), "skipped/s")
	b.Logf("%d SUCCESS in %s: %.0f execs/s, %.0f skipped/s", n, el, float64(n)/el.Seconds(), float64(k)/el.Seconds())

	// Stopping an agent with a backlog takes a while (grace, outbox drain);
	// it is timed, not part of the figure.
	ts := time.Now()
	ra.StopWithin(b, 2*time.Minute)
	b.Logf("agent stopped in %s", time.Since(ts))
}
