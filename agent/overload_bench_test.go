package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/schedule"
)

// BenchmarkOverload measures real executions per second of 200 periodic
// jobs (overlap forbid, no-op Go handler, synchronous=full, 64 workers):
// `every: 100ms` (2,000 fires/s offered, the unloaded rate) against
// `every: 10ms` (20,000 fires/s, 10× that), with and without
// outbox.coalesce_skipped. Each
// iteration is one second of the measured window (run it with
// -benchtime Nx); the first second after the jobs are assigned is not
// measured. A benchmark, so nothing here passes or fails on speed.
func BenchmarkOverload(b *testing.B) {
	const jobs = 200
	for _, bc := range []struct {
		every    string
		coalesce bool
	}{{"100ms", true}, {"10ms", false}, {"10ms", true}} {
		b.Run(fmt.Sprintf("every=%s/coalesce=%v", bc.every, bc.coalesce), func(b *testing.B) {
			c := startCtl(b)
			c.consumer.Stop() // the double's reader would compete for CPU; PubAcks come from the stream
			cfg := testConfig(b, "edge-ov", c.srv.URL())
			cfg.Store.Synchronous = "full"
			cfg.Workers = 64
			cfg.Log.Level = "error"
			cfg.Outbox.CoalesceSkipped = bc.coalesce
			var runs atomic.Int64
			a := startAgent(b, cfg, WithHandler("noop", func(context.Context, Task) Result { runs.Add(1); return Result{} }))
			waitFor(b, 30*time.Second, "registered", func() bool { n, _ := c.heartbeats(); return n > 0 })
			for range jobs {
				j := newJob("edge-ov", "noop", schedule.Spec{Every: bc.every}, nil)
				c.send("edge-ov", assignCmd(j))
			}
			waitFor(b, 30*time.Second, "every job assigned", func() bool {
				stored, err := a.Store().Jobs(context.Background())
				return err == nil && len(stored) == jobs
			})
			<-time.After(time.Second) // warm-up
			b.ResetTimer()
			r0, st0, cpu0, start := runs.Load(), a.Store().Stats(), cpuTime(), time.Now()
			<-time.After(time.Duration(b.N) * time.Second)
			el := time.Since(start)
			n := runs.Load() - r0
			st := a.Store().Stats()
			b.StopTimer()
			b.ReportMetric(float64(n)/el.Seconds(), "execs/s")
			b.ReportMetric(float64(st.Writes-st0.Writes)/el.Seconds(), "writefns/s")
			b.ReportMetric(float64(st.Statements-st0.Statements)/float64(max(n, 1)), "stmts/exec")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/el.Seconds()/1e4, "cpu-%")
		})
	}
}
