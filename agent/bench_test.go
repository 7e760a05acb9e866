package agent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBytes is the process's write_bytes (/proc/self/io): bytes it
// caused to be written to storage (the SQLite file and WAL, and the
// embedded JetStream file store of the benchmark's controller double).
func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkThroughput measures executions per second through the whole
// agent path: run command applied (SQLite), fire on the wheel, TRIGGERED
// row + report, ready queue, worker, RUNNING row + report, no-op Go
// handler, FINISHED row + report, outbox flushed to JetStream with PubAck
// and deleted. The clock stops when the last report is acknowledged.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		sync    string
		workers int
	}{{"full", 64}, {"normal", 64}, {"full", 4}} {
		b.Run(fmt.Sprintf("sync=%s/workers=%d", bc.sync, bc.workers), func(b *testing.B) {
			c := startCtl(b)
			c.consumer.Stop() // the double's reader would compete for CPU; PubAcks come from the stream
			cfg := testConfig(b, "edge-b", c.srv.URL())
			cfg.Store.Synchronous = bc.sync
			cfg.Workers = bc.workers
			cfg.Queue.Size = 4096
			cfg.Log.Level = "error"
			if v := os.Getenv("AX_BENCH_OUTBOX_HOLD"); v != "" { // outbox.hold to try (default DefaultOutboxHold)
				d, err := time.ParseDuration(v)
				if err != nil {
					b.Fatalf("AX_BENCH_OUTBOX_HOLD: %v", err)
				}
				cfg.Outbox.Hold = d
			}
			a := startAgent(b, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
			waitFor(b, 10*time.Second, "registered", func() bool { n, _ := c.heartbeats(); return n > 0 })
			j := newJob("edge-b", "noop", schedule.Spec{Asap: true}, nil)
			j.Concurrency = 1024 // one job, many parallel executions
			base := time.Now().Add(-time.Hour)
			cmds := make([][]byte, b.N)
			for i := range b.N {
				cmd := runCmd(j, 1, base.Add(time.Duration(i)*time.Millisecond))
				cmd.V, cmd.Agent, cmd.IssuedAt = protocol.Version, "edge-b", time.Now().UTC()
				cmds[i], _ = protocol.Encode(cmd)
			}
			ctx := context.Background()
			rpt0 := reportMsgs(b, c)
			b.ResetTimer()
			st0, wb0 := a.Store().Stats(), writeBytes()
			cpu0 := cpuTime()
			start := time.Now()
			for i, data := range cmds {
				a.sched.Apply(uint64(i+1), data, nil)
			}
			// Done when every attempt is final and the outbox is empty.
			// The last attempt is looked up first: counting the live rows
			// at every poll would add the poller's CPU to the agent's.
			last := protocol.ExecID(j.ID, base.Add(time.Duration(b.N-1)*time.Millisecond))
			for {
				if e, err := a.Store().ExecByID(ctx, last, 1); err == nil && e.State == store.StateFinished {
					cnt, err := a.Store().Counts(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if cnt.Pending+cnt.Triggered+cnt.Running+cnt.Outbox == 0 {
						break
					}
				}
				<-time.After(20 * time.Millisecond)
			}
			el := time.Since(start)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			e, _ := a.Store().ExecByID(ctx, protocol.ExecID(j.ID, base), 1)
			if e.State != store.StateFinished || e.Outcome != "success" {
				b.Fatalf("first exec %+v", e)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "execs/s")
			// CPU of the whole process (agent, embedded NATS server,
			// benchmark driver) per execution: less sensitive than execs/s
			// to other load on a shared machine.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/exec")
			// Store commits per execution: one WAL fsync each with
			// synchronous=full (checkpoints add their own).
			st := a.Store().Stats()
			b.ReportMetric(float64(st.Commits-st0.Commits)/float64(b.N), "commits/exec")
			b.ReportMetric(float64(st.Writes-st0.Writes)/float64(b.N), "writefns/exec")
			b.ReportMetric(float64(st.Statements-st0.Statements)/float64(b.N), "stmts/exec")
			b.ReportMetric(float64(st.ExecRowsRead-st0.ExecRowsRead)/float64(b.N), "rowsread/exec")
			b.ReportMetric(float64(writeBytes()-wb0)/float64(b.N), "wbytes/exec")
			// Report messages stored in AX_RPT per execution (one apply
			// each on the controller): 1 when every attempt's steps were
			// coalesced, 3 when none were.
			b.ReportMetric(float64(reportMsgs(b, c)-rpt0)/float64(b.N), "reports/exec")
		})
	}
}

// reportMsgs is the number of messages AX_RPT holds.
func reportMsgs(tb testing.TB, c *ctl) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}
