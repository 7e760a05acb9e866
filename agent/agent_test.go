package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

func TestPeriodicJobFiresAndReports(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-1", c.srv.URL())
	var runs atomicCounter
	startAgent(t, cfg, WithHandler("noop", func(ctx context.Context, tk Task) Result { runs.inc(); return Result{} }))
	j := newJob("edge-1", "noop", schedule.Spec{Every: "50ms"}, nil)
	c.send("edge-1", assignCmd(j))
	waitFor(t, 10*time.Second, "3 finished reports", func() bool { return c.count(protocol.ReportFinished) >= 3 })
	for _, r := range c.all() {
		if r.Kind != protocol.ReportFinished {
			continue
		}
		if r.Outcome != retry.OutcomeSuccess || r.JobID != j.ID || r.Attempt != 1 {
			t.Fatalf("finished report = %+v", r)
		}
		_, sched, err := protocol.ParseExecID("exec_id", r.ExecID)
		if err != nil || sched.UnixMilli() != r.ScheduledAt.UnixMilli() {
			t.Fatalf("exec id %s does not match scheduled_at %s", r.ExecID, r.ScheduledAt)
		}
		kinds := map[protocol.ReportKind]bool{}
		for _, rr := range c.reportsOf(r.ExecID) {
			kinds[rr.Kind] = true
		}
		if !kinds[protocol.ReportTriggered] || !kinds[protocol.ReportRunning] {
			t.Fatalf("exec %s lacks triggered/running reports: %v", r.ExecID, kinds)
		}
	}
}

func TestPanicIsRecoveredWithStack(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-p", c.srv.URL())
	startAgent(t, cfg, WithHandler("boom", func(ctx context.Context, tk Task) Result { panic("kaboom") }))
	j := newJob("edge-p", "boom", schedule.Spec{Asap: true}, nil)
	at := time.Now()
	cmd := runCmd(j, 1, at)
	c.send("edge-p", cmd)
	fin := waitFinished(t, c, 10*time.Second, cmd.Run.ExecID)
	if fin.Outcome != retry.OutcomePanic {
		t.Fatalf("outcome = %s, want panic", fin.Outcome)
	}
	if !strings.Contains(fin.Result.Message, "kaboom") || !strings.Contains(fin.Result.Message, "goroutine") {
		t.Fatalf("result message lacks panic value or stack: %q", fin.Result.Message)
	}
	if len(fin.Result.Message) > protocol.MaxMessageLen {
		t.Fatalf("message of %d bytes is over the bound", len(fin.Result.Message))
	}
}
